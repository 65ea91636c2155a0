// KafkaJS 2.2.4's admin against a broker with SCRAM users and an authorizer: alterConfigs, describeConfigs,
// createAcls / describeAcls / deleteAcls. Exits 1 at the first answer that is not the expected one.
//   kafka-kip broker --brokers 1 --port 29492 --user admin=admin-pw --user app=app-pw --authorizer --super-user admin &
//   npm install kafkajs@2.2.4 && node kafkajs_admin.js 127.0.0.1:29492
const assert = require('node:assert/strict')
const { Kafka, ConfigResourceTypes, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes,
  logLevel } = require('kafkajs')

const kafka = new Kafka({ clientId: 'kafkajs-admin', brokers: process.argv[2].split(','), logLevel: logLevel.WARN,
  sasl: { mechanism: 'scram-sha-256', username: 'admin', password: 'admin-pw' } })
const topic = `kafkajs-${Date.now()}`
const pattern = { resourceType: AclResourceTypes.TOPIC, resourceName: topic,
  resourcePatternType: ResourcePatternTypes.LITERAL, principal: 'User:app', host: '*' }

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  try {
    assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }],
      waitForLeaders: true }), true)
    const altered = await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC,
      name: topic, configEntries: [{ name: 'retention.ms', value: '86400000' }, { name: 'cleanup.policy', value: 'compact' }] }] })
    assert.deepEqual(altered.resources.map(r => [r.errorCode, r.resourceName]), [[0, topic]])
    const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC,
      name: topic, configNames: ['cleanup.policy', 'max.message.bytes', 'retention.ms'] }] })
    // [name, value, isDefault, source]: 1 DYNAMIC_TOPIC_CONFIG, 5 DEFAULT_CONFIG
    assert.deepEqual(described.resources[0].configEntries.map(e => [e.configName, e.configValue, e.isDefault, e.configSource]),
      [['cleanup.policy', 'compact', false, 1], ['max.message.bytes', '1048588', true, 5], ['retention.ms', '86400000', false, 1]])
    assert.equal(await admin.createAcls({ acl: [{ ...pattern, operation: AclOperationTypes.READ,
      permissionType: AclPermissionTypes.ALLOW }] }), true)
    const filter = { ...pattern, operation: AclOperationTypes.ANY, permissionType: AclPermissionTypes.ANY }
    const acls = await admin.describeAcls(filter)
    assert.deepEqual(acls.resources.map(r => [r.resourceName, r.acls]), [[topic, [{ principal: 'User:app', host: '*',
      operation: AclOperationTypes.READ, permissionType: AclPermissionTypes.ALLOW }]]])
    const deleted = await admin.deleteAcls({ filters: [filter] })
    assert.deepEqual(deleted.filterResponses.map(f => [f.errorCode, f.matchingAcls.length]), [[0, 1]])
    assert.deepEqual((await admin.describeAcls(filter)).resources, [])
    await admin.deleteTopics({ topics: [topic] })
    console.log('KafkaJS admin: alterConfigs, describeConfigs, createAcls, describeAcls, deleteAcls as expected')
  } finally {
    await admin.disconnect()
  }
}

main().catch(error => { console.error(error); process.exit(1) })
