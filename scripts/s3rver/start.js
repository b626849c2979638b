// Starts an S3-protocol server (@20minutes/s3rver, which checks AWS Signature
// V4) for Keel's storage tests (--openssl-legacy-provider: its listing
// continuation tokens use DES):
//   node --openssl-legacy-provider start.js --port PORT --directory DIR [--address 127.0.0.1] [--bucket NAME]...
// The only accepted credentials are AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
// from the environment (the package's built-in S3RVER/S3RVER pair is revoked).
// Logs each request (path, query, status) and prints
// "s3rver listening on ADDRESS:PORT" once it accepts requests, and
// stops on SIGTERM or SIGINT.
'use strict';

const S3rver = require('@20minutes/s3rver');
const AWSAccount = require('@20minutes/s3rver/lib/models/account');

function parseArguments(argv) {
  const options = { address: '127.0.0.1', port: 0, directory: '', buckets: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${name}: needs a value`);
    if (name === '--address') options.address = value;
    else if (name === '--port') options.port = Number(value);
    else if (name === '--directory') options.directory = value;
    else if (name === '--bucket') options.buckets.push(value);
    else throw new Error(`unknown argument ${name}`);
  }
  if (!options.directory) throw new Error('--directory is required');
  if (!Number.isInteger(options.port) || options.port <= 0) throw new Error('--port is required');
  return options;
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const accessKey = process.env.AWS_ACCESS_KEY_ID;
  const secretKey = process.env.AWS_SECRET_ACCESS_KEY;
  if (!accessKey || !secretKey) {
    throw new Error('set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  }
  AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKey, secretKey);

  const server = new S3rver({
    address: options.address,
    port: options.port,
    directory: options.directory,
    silent: false,
    vhostBuckets: false,
    configureBuckets: options.buckets.map((name) => ({ name })),
  });
  const address = await server.run();
  console.log(`s3rver listening on ${address.address}:${address.port}`);
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error) => {
  console.error(`s3rver: ${error.message}`);
  process.exit(1);
});
