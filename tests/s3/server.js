#!/usr/bin/env node
// dpipe S3 test server.
//
// One Node.js process holding two HTTP servers on 127.0.0.1:
//   * s3rver (npm package "s3rver"), a real S3-compatible server that stores
//     buckets and objects under the data directory given on the command line;
//   * a proxy in front of it, which the C++ tests talk to. It checks AWS
//     Signature Version 4 like AWS does, injects faults on demand, keeps a log
//     of the requests it saw, and offers a small control API.
//
// Usage: node server.js <data directory>
//
// Buckets are addressed path-style (http://127.0.0.1:<port>/<bucket>/<key>) or virtual-hosted
// (http://<bucket>.s3.localhost:<port>/<key>).
//
// Once both servers listen, exactly one line is printed to stdout:
//   {"server": <s3rver port>, "proxy": <proxy port>}
// and nothing else is ever written to stdout. Diagnostics go to stderr, and
// only when the environment variable DPIPE_S3_VERBOSE is set.
//
// The process exits on SIGTERM/SIGINT and when its standard input closes, so
// a parent that dies never leaves it behind: the parent must hand it a pipe
// as stdin and keep its end open. Set DPIPE_S3_IGNORE_STDIN=1 to start it by
// hand in the background (stdin then plays no part).
//
// Signature check (requests with "Authorization: AWS4-HMAC-SHA256 ..."):
//   known access keys: S3RVER/S3RVER and dpipe-test/dpipe-test-secret.
//   unknown key                          -> 403 InvalidAccessKeyId
//   x-amz-content-sha256 missing or not
//   among SignedHeaders                  -> 400 InvalidRequest
//   signature differs from the one the
//   aws4 package computes (it sorts the
//   query, as AWS does)                  -> 403 SignatureDoesNotMatch
//   malformed Authorization header       -> 400 AuthorizationHeaderMalformed
// A request that passes is forwarded without its Authorization header
// (s3rver lets anonymous requests do everything). Requests without an
// Authorization header are forwarded as they are.
//
// If-Match: a GET whose If-Match differs from the object's ETag answers 412 PreconditionFailed,
// as AWS does (s3rver ignores the header).
//
// Control API (on the proxy port, never forwarded to s3rver):
//   POST /__control/fault   body {"mode": M, "after_bytes": N, "times": K,
//                           "match": S}  -> 200 "ok"
//       Appends a fault. Faults apply only to GET requests of objects
//       (/bucket/key..., not listings) whose path (raw or percent-decoded)
//       contains `match` (default "": every object). Each matching request
//       consumes at most one fault, the first in the list that matches; a
//       fault is gone after `times` requests (default 1). after_bytes
//       defaults to 0. Modes:
//         reset          forward status, headers and after_bytes body bytes,
//                        then reset the client connection (TCP RST)
//         slowdown       answer 503 SlowDown without forwarding
//         internal       answer 500 InternalError without forwarding
//         stall          forward status, headers and after_bytes body bytes,
//                        then send nothing more, keeping the connection open
//         stall_headers  never answer (the connection stays open)
//         corrupt        forward the whole response with the body byte at
//                        after_bytes flipped (the length and ETag unchanged)
//       For reset and stall, a body no longer than after_bytes is sent whole
//       and the response completes normally.
//   POST /__control/clear   -> 200 "ok"; removes all faults, clears the log.
//   GET  /__control/log     -> 200 JSON array, one entry per S3 request the
//       proxy received (control requests excluded), in arrival order:
//         {"method", "url" (raw path+query), "range" (Range header or null),
//          "signed_headers" (array or null), "status" (status the proxy
//          answered or forwarded; null while none was sent),
//          "fault" (mode applied or null)}
//   POST /__control/upload  body {"bucket": B, "directory": D, "prefix": P}
//       Creates bucket B if missing, uploads every regular file under the
//       absolute directory D (recursively) as key P + relative path ('/'
//       separated), straight to s3rver, 16 at a time; answers 200
//       {"uploaded": N} once all are stored.
//   POST /__control/bucket  body {"bucket": B} -> 200 "ok"; creates an empty
//       bucket (no error if it exists).
// Errors of the control API answer 400 (bad request) or 500, with a text body.

'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');

const aws4 = require('aws4');
const S3rver = require('s3rver');

// Access key id -> secret access key, for the signature check.
const CREDENTIALS = {
  S3RVER: 'S3RVER',
  'dpipe-test': 'dpipe-test-secret',
};

const FAULT_MODES = new Set(['reset', 'slowdown', 'internal', 'stall', 'stall_headers', 'corrupt']);

// Before a reset, time left for the bytes already written to reach the
// client: a TCP RST drops whatever is still in the kernel's send buffer.
const RESET_GRACE_MS = 50;

const UPLOAD_CONCURRENCY = 16;

const VERBOSE = !!process.env.DPIPE_S3_VERBOSE;

function log(...args) {
  if (VERBOSE) console.error('[dpipe-s3]', ...args);
}

// ---------------------------------------------------------------------------
// s3rver 3.7.1 encrypts the continuation tokens of ListObjectsV2 with DES,
// which OpenSSL 3 keeps in its "legacy" provider: without
// --openssl-legacy-provider every truncated listing fails with InternalError.
// Where DES is missing, s3rver's 'des' is served by AES-128-CBC instead (key
// and 8-byte IV doubled). The tokens only have to be opaque and readable by
// the same server, so any reversible cipher does.
function provideDesForS3rver() {
  try {
    crypto.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
    return; // native DES works
  } catch (e) {
    log('DES unavailable, serving it with AES-128-CBC:', e.message);
  }
  const substitute = (original) =>
    function (algorithm, key, iv, options) {
      if (typeof algorithm === 'string' && algorithm.toLowerCase() === 'des') {
        const k = Buffer.from(key);
        const v = Buffer.from(iv);
        return original.call(this, 'aes-128-cbc', Buffer.concat([k, k]), Buffer.concat([v, v]), options);
      }
      return original.call(this, algorithm, key, iv, options);
    };
  crypto.createCipheriv = substitute(crypto.createCipheriv);
  crypto.createDecipheriv = substitute(crypto.createDecipheriv);
}

// ---------------------------------------------------------------------------
// Small helpers

// Body of an S3 error response, as AWS writes it.
function s3ErrorXml(code, message) {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${code}</Code><Message>${message}</Message>` +
    '<RequestId>dpipe-proxy</RequestId></Error>'
  );
}

function sendS3Error(res, status, code, message) {
  const body = s3ErrorXml(code, message);
  res.writeHead(status, {
    'Content-Type': 'application/xml',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function sendText(res, status, text, contentType = 'text/plain') {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

// Reads a whole (small) request body as a string.
function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// Splits a raw request URL into its raw path and raw query ('' if none).
function splitUrl(rawUrl) {
  const q = rawUrl.indexOf('?');
  return q < 0 ? [rawUrl, ''] : [rawUrl.slice(0, q), rawUrl.slice(q + 1)];
}

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch (e) {
    return s;
  }
}

// True for a path-style object path, /bucket/key... with a non-empty key.
function isObjectPath(rawPath) {
  const m = /^\/[^/]+\/(.+)$/.exec(rawPath);
  return m !== null;
}

// Percent-encodes a key for use in a path, keeping its '/' separators.
function encodeKey(key) {
  return key.split('/').map(encodeURIComponent).join('/');
}

// Headers that concern one connection only, never forwarded either way.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'expect',
]);

function endToEndHeaders(headers, drop = []) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(name) && !drop.includes(name)) out[name] = value;
  }
  return out;
}

// ---------------------------------------------------------------------------
// SigV4 check

const AUTH_RE =
  /^AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request\s*,\s*SignedHeaders=([^,\s]+)\s*,\s*Signature=([0-9a-fA-F]+)\s*$/;

// Checks the signature of a request with an Authorization header. Returns
// null when it is valid, else {status, code, message} for the error answer.
// `parsed` receives the signed header names, for the log.
function checkSignature(req, parsed) {
  const m = AUTH_RE.exec(req.headers.authorization);
  if (!m) {
    return {
      status: 400,
      code: 'AuthorizationHeaderMalformed',
      message: 'The authorization header is malformed.',
    };
  }
  const [, accessKeyId, , region, service, signedList, signature] = m;
  const signedNames = signedList.split(';');
  parsed.signedHeaders = signedNames;

  const secretAccessKey = CREDENTIALS[accessKeyId];
  if (secretAccessKey === undefined) {
    return {
      status: 403,
      code: 'InvalidAccessKeyId',
      message: 'The AWS Access Key Id you provided does not exist in our records.',
    };
  }
  if (!('x-amz-content-sha256' in req.headers) || !signedNames.includes('x-amz-content-sha256')) {
    return {
      status: 400,
      code: 'InvalidRequest',
      message: 'Missing required header for this request: x-amz-content-sha256',
    };
  }

  // Only the headers the client signed, with the values received. aws4 leaves
  // some headers (range, user-agent, ...) out of the signature by default:
  // extraHeadersToInclude puts back every one the client named.
  const headers = {};
  const include = {};
  for (const name of signedNames) {
    include[name] = true;
    if (name in req.headers) headers[name] = req.headers[name];
  }
  const signer = new aws4.RequestSigner(
    {
      host: req.headers.host,
      path: req.url,
      method: req.method,
      service,
      region,
      headers,
      extraHeadersToInclude: include,
      doNotModifyHeaders: true,
    },
    { accessKeyId, secretAccessKey },
  );
  // With doNotModifyHeaders aws4 would take the time from the Date header or
  // the clock; AWS takes it from x-amz-date first.
  if (req.headers['x-amz-date']) signer.datetime = req.headers['x-amz-date'];
  const expected = Buffer.from(signer.signature());
  const received = Buffer.from(signature.toLowerCase());
  if (expected.length !== received.length || !crypto.timingSafeEqual(expected, received)) {
    log('signature mismatch; canonical request was:\n' + signer.canonicalString());
    return {
      status: 403,
      code: 'SignatureDoesNotMatch',
      message:
        'The request signature we calculated does not match the signature you provided. ' +
        'Check your key and signing method.',
    };
  }
  return null;
}

// ---------------------------------------------------------------------------
// Proxy state: faults and the request log

let faults = []; // {mode, after_bytes, times, match}, in the order added
let requestLog = []; // entries as described in the header comment

// Takes (consumes) the first fault that applies to this request, or null.
function takeFault(req, rawPath) {
  if (req.method !== 'GET' || !isObjectPath(rawPath)) return null;
  const decoded = safeDecode(rawPath);
  const i = faults.findIndex((f) => rawPath.includes(f.match) || decoded.includes(f.match));
  if (i < 0) return null;
  const fault = faults[i];
  fault.times -= 1;
  if (fault.times <= 0) faults.splice(i, 1);
  return fault;
}

// ---------------------------------------------------------------------------
// Forwarding

function startProxy(s3Port) {
  // Connections to s3rver are kept alive and reused.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  // Writes at most `limit` bytes of upstreamRes's body to res, honouring
  // backpressure. Calls onLimit() once `limit` bytes were handed to the
  // socket; if the body ends before that, ends res normally instead.
  function forwardPrefix(upstreamRes, res, limit, onLimit) {
    if (limit <= 0) {
      upstreamRes.destroy();
      res.flushHeaders();
      setImmediate(onLimit);
      return;
    }
    let remaining = limit;
    upstreamRes.on('data', (chunk) => {
      if (remaining <= 0) return;
      const part = chunk.length > remaining ? chunk.subarray(0, remaining) : chunk;
      remaining -= part.length;
      if (remaining === 0) {
        upstreamRes.destroy();
        res.write(part, () => onLimit());
      } else if (!res.write(part)) {
        upstreamRes.pause();
        res.once('drain', () => upstreamRes.resume());
      }
    });
    upstreamRes.on('end', () => {
      if (remaining > 0) res.end();
    });
  }

  function forward(req, res, entry, fault, dropHeaders) {
    const upstreamReq = http.request({
      host: '127.0.0.1',
      port: s3Port,
      method: req.method,
      path: req.url,
      headers: endToEndHeaders(req.headers, dropHeaders),
      agent,
    });

    upstreamReq.on('response', (upstreamRes) => {
      // s3rver broke off its answer: break off ours too.
      upstreamRes.on('error', () => res.destroy());
      // If-Match, as AWS honours it and s3rver does not: an object whose ETag changed is 412.
      const ifMatch = req.headers['if-match'];
      if (ifMatch && upstreamRes.statusCode < 300 && upstreamRes.headers.etag !== ifMatch) {
        upstreamRes.destroy();
        entry.status = 412;
        sendS3Error(res, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
        return;
      }
      entry.status = upstreamRes.statusCode;
      res.writeHead(
        upstreamRes.statusCode,
        upstreamRes.statusMessage,
        endToEndHeaders(upstreamRes.headers),
      );
      if (fault && fault.mode === 'reset') {
        forwardPrefix(upstreamRes, res, fault.after_bytes, () => {
          setTimeout(() => {
            log('reset', req.url);
            if (res.socket) res.socket.resetAndDestroy();
          }, RESET_GRACE_MS);
        });
      } else if (fault && fault.mode === 'stall') {
        forwardPrefix(upstreamRes, res, fault.after_bytes, () => log('stalled', req.url));
      } else if (fault && fault.mode === 'corrupt') {
        // The byte at after_bytes is flipped: the right length and ETag, the wrong bytes.
        let offset = 0;
        upstreamRes.on('data', (chunk) => {
          const at = fault.after_bytes - offset;
          if (at >= 0 && at < chunk.length) chunk[at] ^= 0xff;  // eslint-disable-line no-param-reassign
          offset += chunk.length;
          if (!res.write(chunk)) {
            upstreamRes.pause();
            res.once('drain', () => upstreamRes.resume());
          }
        });
        upstreamRes.on('end', () => res.end());
      } else {
        upstreamRes.pipe(res);
      }
    });

    upstreamReq.on('error', (err) => {
      log('upstream error', req.method, req.url, err.message);
      if (!res.headersSent) {
        entry.status = 500;
        sendS3Error(res, 500, 'InternalError', 'We encountered an internal error. Please try again.');
      } else {
        res.destroy();
      }
    });

    // The client went away before the answer was complete: stop upstream.
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.on('error', () => upstreamReq.destroy());

    req.pipe(upstreamReq);
  }

  async function handleControl(req, res, rawPath) {
    const route = `${req.method} ${rawPath}`;
    try {
      switch (route) {
        case 'POST /__control/fault': {
          const spec = JSON.parse(await readBody(req));
          if (!FAULT_MODES.has(spec.mode)) {
            return sendText(res, 400, `unknown fault mode: ${spec.mode}`);
          }
          const fault = {
            mode: spec.mode,
            after_bytes: Number.isInteger(spec.after_bytes) ? spec.after_bytes : 0,
            times: Number.isInteger(spec.times) ? spec.times : 1,
            match: typeof spec.match === 'string' ? spec.match : '',
          };
          if (fault.times > 0) faults.push(fault);
          log('fault added', JSON.stringify(fault));
          return sendText(res, 200, 'ok');
        }
        case 'POST /__control/clear':
          await readBody(req);
          faults = [];
          requestLog = [];
          return sendText(res, 200, 'ok');
        case 'GET /__control/log':
          return sendText(res, 200, JSON.stringify(requestLog), 'application/json');
        case 'POST /__control/bucket': {
          const spec = JSON.parse(await readBody(req));
          await createBucket(s3Port, agent, spec.bucket);
          return sendText(res, 200, 'ok');
        }
        case 'POST /__control/upload': {
          const spec = JSON.parse(await readBody(req));
          if (typeof spec.directory !== 'string' || !path.isAbsolute(spec.directory)) {
            return sendText(res, 400, 'directory must be an absolute path');
          }
          const n = await uploadDirectory(s3Port, agent, spec.bucket, spec.directory, spec.prefix || '');
          return sendText(res, 200, JSON.stringify({ uploaded: n }), 'application/json');
        }
        default:
          return sendText(res, 404, `unknown control request: ${route}`);
      }
    } catch (err) {
      log('control error', route, err.stack);
      const status = err instanceof SyntaxError || err instanceof TypeError ? 400 : 500;
      return sendText(res, status, String(err.message || err));
    }
  }

  const server = http.createServer((req, res) => {
    const [rawPath] = splitUrl(req.url);
    if (rawPath.startsWith('/__control/')) {
      handleControl(req, res, rawPath);
      return;
    }

    const entry = {
      method: req.method,
      url: req.url,
      range: req.headers.range === undefined ? null : req.headers.range,
      signed_headers: null,
      status: null,
      fault: null,
    };
    requestLog.push(entry);

    const signed = 'authorization' in req.headers;
    if (signed) {
      const parsed = {};
      const error = checkSignature(req, parsed);
      entry.signed_headers = parsed.signedHeaders || null;
      if (error) {
        log('refused', req.method, req.url, error.code);
        entry.status = error.status;
        req.resume(); // drain any body so the connection stays usable
        return sendS3Error(res, error.status, error.code, error.message);
      }
    }

    const fault = takeFault(req, rawPath);
    if (fault) {
      entry.fault = fault.mode;
      log('fault', fault.mode, req.method, req.url);
    }
    switch (fault && fault.mode) {
      case 'slowdown':
        entry.status = 503;
        return sendS3Error(res, 503, 'SlowDown', 'Please reduce your request rate.');
      case 'internal':
        entry.status = 500;
        return sendS3Error(res, 500, 'InternalError', 'We encountered an internal error. Please try again.');
      case 'stall_headers':
        return; // keep the request open and never answer
      default:
        return forward(req, res, entry, fault, signed ? ['authorization'] : []);
    }
  });
  // Long uploads and stalled answers must not be cut by Node's own timeouts.
  server.requestTimeout = 0;
  server.timeout = 0;

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// ---------------------------------------------------------------------------
// Direct requests to s3rver, for the control API

// Sends one request to s3rver; resolves with {status, body}.
function s3Request(s3Port, agent, method, urlPath, { headers = {}, body = null } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s3Port, method, path: urlPath, headers, agent });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    if (body === null) req.end();
    else body.on('error', reject).pipe(req);
  });
}

async function createBucket(s3Port, agent, bucket) {
  if (typeof bucket !== 'string' || bucket === '') throw new TypeError('bucket name missing');
  const head = await s3Request(s3Port, agent, 'HEAD', '/' + encodeURIComponent(bucket));
  if (head.status === 200) return;
  const put = await s3Request(s3Port, agent, 'PUT', '/' + encodeURIComponent(bucket));
  if (put.status !== 200) throw new Error(`creating bucket ${bucket}: HTTP ${put.status} ${put.body}`);
}

// Lists the regular files under dir, recursively, as paths relative to dir
// with '/' separators.
async function listFiles(dir, rel = '') {
  const out = [];
  const entries = await fs.promises.readdir(path.join(dir, rel), { withFileTypes: true });
  for (const e of entries) {
    const r = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) out.push(...(await listFiles(dir, r)));
    else if (e.isFile()) out.push(r);
  }
  return out;
}

async function uploadDirectory(s3Port, agent, bucket, dir, prefix) {
  const files = await listFiles(dir);
  await createBucket(s3Port, agent, bucket);
  let next = 0;
  async function worker() {
    while (next < files.length) {
      const rel = files[next++];
      const file = path.join(dir, ...rel.split('/'));
      const { size } = await fs.promises.stat(file);
      const res = await s3Request(s3Port, agent, 'PUT', `/${encodeURIComponent(bucket)}/${encodeKey(prefix + rel)}`, {
        headers: { 'Content-Length': size },
        body: fs.createReadStream(file),
      });
      if (res.status !== 200) throw new Error(`uploading ${rel}: HTTP ${res.status} ${res.body}`);
    }
  }
  await Promise.all(Array.from({ length: Math.min(UPLOAD_CONCURRENCY, files.length) }, worker));
  log(`uploaded ${files.length} files from ${dir} to ${bucket}/${prefix}`);
  return files.length;
}

// ---------------------------------------------------------------------------
// Main

async function main() {
  const dataDir = process.argv[2];
  if (!dataDir) {
    console.error('usage: node server.js <data directory>');
    process.exit(2);
  }
  fs.mkdirSync(dataDir, { recursive: true });
  provideDesForS3rver();

  const exit = () => process.exit(0);
  process.on('SIGTERM', exit);
  process.on('SIGINT', exit);
  if (!process.env.DPIPE_S3_IGNORE_STDIN) {
    process.stdin.on('end', exit);
    process.stdin.on('close', exit);
    process.stdin.on('error', exit);
    process.stdin.resume();
  }

  const s3 = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory: path.resolve(dataDir),
    configureBuckets: [],
    // Virtual-hosted requests name the bucket in the host: <bucket>.s3.localhost (libcurl
    // resolves *.localhost to the loopback itself).
    serviceEndpoint: 'localhost',
  });
  const s3Address = await s3.run();
  const proxy = await startProxy(s3Address.port);
  const proxyPort = proxy.address().port;
  log(`s3rver on ${s3Address.port}, proxy on ${proxyPort}, data in ${dataDir}`);
  process.stdout.write(`{"server": ${s3Address.port}, "proxy": ${proxyPort}}\n`);
}

main().catch((err) => {
  console.error('dpipe-s3 test server failed:', err && err.stack ? err.stack : err);
  process.exit(1);
});
