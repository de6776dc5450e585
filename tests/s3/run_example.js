#!/usr/bin/env node
// Runs a program (examples/s3.cpp, benchmarks) against the S3 test server, as a user's job runs
// against a real store: starts server.js, uploads the example's dataset into the bucket
// "dpipe-example" (train/part-<n>.csv: 8 objects of 100 rows "id,text"), sets the variables the
// AWS tools read (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) and
// runs the program with its arguments. Exits with the program's status; the server and the data
// go with it.
//
// Usage: node run_example.js <program> [arguments...]

'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');

function control(port, what, body) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: '127.0.0.1', port, method: 'POST', path: `/__control/${what}` },
      (response) => {
        let text = '';
        response.on('data', (chunk) => { text += chunk; });
        response.on('end', () => (response.statusCode === 200 ? resolve(text) : reject(new Error(text))));
      });
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}

async function main() {
  const [program, ...args] = process.argv.slice(2);
  if (!program) throw new Error('usage: node run_example.js <program> [arguments...]');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dpipe-s3-example-'));
  const dataset = path.join(work, 'dataset');
  fs.mkdirSync(path.join(dataset, 'train'), { recursive: true });
  for (let part = 0; part < 8; ++part) {
    let text = 'id,text\n';
    for (let row = 0; row < 100; ++row) text += `${part * 100 + row},sample\n`;
    fs.writeFileSync(path.join(dataset, 'train', `part-${part}.csv`), text);
  }
  const server = spawn(process.execPath, [path.join(__dirname, 'server.js'), path.join(work, 's3rver')],
                       { stdio: ['pipe', 'pipe', 'inherit'] });
  const ports = await new Promise((resolve, reject) => {
    let line = '';
    server.stdout.on('data', (chunk) => {
      line += chunk;
      if (line.includes('\n')) resolve(JSON.parse(line));
    });
    server.on('exit', (code) => reject(new Error(`server.js exited with ${code}`)));
  });
  const cleanup = () => {
    server.kill('SIGTERM');
    fs.rmSync(work, { recursive: true, force: true });
  };
  try {
    await control(ports.proxy, 'upload', { bucket: 'dpipe-example', directory: dataset, prefix: '' });
  } catch (error) {
    cleanup();
    throw error;
  }
  const child = spawn(program, args, {
    stdio: 'inherit',
    env: {
      ...process.env,
      AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${ports.proxy}`,
      AWS_ACCESS_KEY_ID: 'dpipe-test',
      AWS_SECRET_ACCESS_KEY: 'dpipe-test-secret',
      AWS_REGION: 'us-east-1',
      DPIPE_S3_SERVER_ENDPOINT: `http://127.0.0.1:${ports.server}`,
    },
  });
  child.on('exit', (code, signal) => {
    cleanup();
    process.exit(code === null ? 128 + os.constants.signals[signal] : code);
  });
}

main().catch((error) => {
  console.error(`run_example.js: ${error.message}`);
  process.exit(1);
});
