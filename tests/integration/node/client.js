// client.js - a second, independent gRPC client for weir: grpc-js with the
// messages loaded at run time from the project's proto/ files by
// proto-loader. Runs a fixed script of calls against 127.0.0.1:PORT and
// prints one JSON object with what came back; test_grpc_node.py starts
// weir with the matching rules and checks the results.
//
// usage: node client.js PORT
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_DIR = path.resolve(__dirname, '..', '..', '..', 'proto');

function load() {
  const def = protoLoader.loadSync(
    ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_DIR, '/usr/include'],
    });
  return grpc.loadPackageDefinition(def);
}

function descriptor(entries, extra) {
  const d = {entries: Object.entries(entries).map(([key, value]) => ({key, value}))};
  return Object.assign(d, extra || {});
}

// A promise of {response} or {error: {code, details}}.
function call(client, method, request) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + 10000);
    client[method](request, {deadline}, (err, response) => {
      if (err)
        resolve({error: {code: err.code, details: err.details}});
      else
        resolve({response});
    });
  });
}

async function main() {
  const port = process.argv[2];
  if (!port) {
    console.error('usage: node client.js PORT');
    process.exit(2);
  }
  const pkg = load();
  const address = `127.0.0.1:${port}`;
  const creds = grpc.credentials.createInsecure();
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, creds);
  const health = new pkg.grpc.health.v1.Health(address, creds);
  const out = {};

  // OK, OK, then OVER_LIMIT on a 2 per hour token bucket
  out.sequence = [];
  for (let i = 0; i < 3; i++)
    out.sequence.push(await call(rls, 'ShouldRateLimit',
                                 {domain: 'node', descriptors: [descriptor({key: 'seq'})]}));

  // statuses in request order: matched, unmatched, unlimited
  out.statuses = await call(rls, 'ShouldRateLimit', {
    domain: 'node',
    descriptors: [descriptor({key: 'st'}), descriptor({other: 'x'}), descriptor({free: 'x'})],
  });

  // hits: the request's, and a descriptor's own (0 = a peek)
  out.hits = await call(rls, 'ShouldRateLimit', {
    domain: 'node', hits_addend: 3, descriptors: [descriptor({key: 'hits'})]});
  out.peek = await call(rls, 'ShouldRateLimit', {
    domain: 'node', hits_addend: 3,
    descriptors: [descriptor({key: 'hits'}, {hits_addend: {value: 0}})]});

  // an override, and refusals
  out.override = await call(rls, 'ShouldRateLimit', {
    domain: 'node',
    descriptors: [descriptor({key: 'ov'}, {limit: {requests_per_unit: 9, unit: 'MINUTE'}})]});
  out.empty_domain = await call(rls, 'ShouldRateLimit',
                                {domain: '', descriptors: [descriptor({key: 'x'})]});
  out.no_descriptors = await call(rls, 'ShouldRateLimit', {domain: 'node', descriptors: []});
  out.unknown_domain = await call(rls, 'ShouldRateLimit',
                                  {domain: 'nope', descriptors: [descriptor({key: 'x'})]});

  // many calls at once on this one client (one HTTP/2 connection)
  const many = [];
  for (let i = 0; i < 120; i++)
    many.push(call(rls, 'ShouldRateLimit',
                   {domain: 'node', descriptors: [descriptor({key: 'crowd'})]}));
  const results = await Promise.all(many);
  out.concurrent = {
    ok: results.filter((r) => r.response && r.response.overall_code === 'OK').length,
    over: results.filter((r) => r.response && r.response.overall_code === 'OVER_LIMIT').length,
    errors: results.filter((r) => r.error).length,
  };

  out.health = {
    empty: await call(health, 'Check', {service: ''}),
    ratelimit: await call(health, 'Check', {service: 'ratelimit'}),
    other: await call(health, 'Check', {service: 'other'}),
  };

  rls.close();
  health.close();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
