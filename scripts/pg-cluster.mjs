#!/usr/bin/env node
// A throwaway PostgreSQL cluster for the tests and the bench: a temporary folder, a free loopback port,
// the unix socket inside the folder, and a password-authenticated test user (so a test that looks for a
// leaked password looks for a real one).
//
//   node scripts/pg-cluster.mjs start [--durable] [--tls]
//                                                   start one, print {url, dir, port, caFile} as one JSON line, leave it running
//   node scripts/pg-cluster.mjs stop <dir>          stop it and delete its folder
//   node scripts/pg-cluster.mjs serve [--durable] [--tls]
//                                                   start one, print the JSON line, then obey "stop" / "start" /
//                                                   "restart" lines on stdin (answering "stopped" / "started" /
//                                                   "restarted"); at the end of stdin (the owner exited, however)
//                                                   stop it and delete it
//
// Imported (the JS tests do), it exports createDatabase (a fresh database on a cluster, for one test),
// holdTableLock (another session that keeps a table locked, to make statements wait) and freePort.
//
// Postgres refuses to run as root, and CI runs as root: then every server command runs as the `postgres`
// user (runuser), in a folder that user owns. Without --durable the cluster skips fsync: it is thrown away.
// With --tls it also accepts TLS, with a server certificate (for 127.0.0.1) from a CA made for it, whose
// certificate is caFile.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const DIR_PREFIX = 'mcpferry-pg-';
const TEST_USER = 'mcpferry_test';
const TEST_DATABASE = 'mcpferry_test';
/** How long pg_ctl waits for the server to start or stop, in seconds. */
const PG_CTL_WAIT_S = '30';
/** Enough for 16 fleet workers with pools of 8, several worker processes and the tests' own connections. */
const MAX_CONNECTIONS = 300;

function postgresBin() {
  if (process.env.MCPFERRY_PG_BIN) return process.env.MCPFERRY_PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) {
    throw new Error(`no PostgreSQL server found (no ${root}/<version>/bin/initdb; install the Debian package postgresql, or set MCPFERRY_PG_BIN)`);
  }
  versions.sort((a, b) => Number(b) - Number(a));
  return join(root, versions[0], 'bin');
}

const asRoot = process.getuid?.() === 0;

/** Runs a Postgres program, as the postgres user when we are root. Throws with its output on failure. */
function pg(program, args, { allowFailure = false } = {}) {
  const path = join(postgresBin(), program);
  const [command, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
  const result = spawnSync(command, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${program} could not run: ${result.error.message}`);
  if (result.status !== 0 && !allowFailure) {
    throw new Error(`${program} ${args[0] ?? ''} failed (exit ${result.status}): ${(result.stderr || result.stdout).trim()}`);
  }
  return result;
}

/** The unprivileged user the server runs as when we are root. */
function postgresUser() {
  const id = (flag) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim() || NaN);
  const [uid, gid] = [id('-u'), id('-g')];
  if (!Number.isInteger(uid) || uid === 0) throw new Error('running as root, but there is no unprivileged `postgres` user to run the server as');
  return { uid, gid };
}

/** A TCP port on 127.0.0.1 nothing listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function logTail(dir) {
  try {
    return readFileSync(join(dir, 'server.log'), 'utf8').trim().split('\n').slice(-15).join('\n');
  } catch {
    return '(no server log)';
  }
}

function pgCtl(dir, action) {
  const args = ['-D', join(dir, 'data'), '-w', '-t', PG_CTL_WAIT_S];
  if (action === 'start') return pg('pg_ctl', [...args, '-l', join(dir, 'server.log'), 'start']);
  if (action === 'restart') return pg('pg_ctl', [...args, '-l', join(dir, 'server.log'), '-m', 'fast', 'restart']);
  return pg('pg_ctl', [...args, '-m', 'fast', 'stop'], { allowFailure: true });
}

/** psql as the connecting client: over TCP with the URL's credentials, ignoring any ~/.psqlrc. */
function psqlArgs(url, ...args) {
  return [join(postgresBin(), 'psql'), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url, ...args]];
}

/**
 * A fresh, empty database on the cluster `url` points to, owned by its user (who needs CREATEDB, as
 * the test user has), named `<prefix>_<random>` so reruns never meet an old one. Returns its URL.
 */
export function createDatabase(url, prefix = 'mcpferry') {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const [psql, args] = psqlArgs(url, '-c', `CREATE DATABASE ${name}`);
  const result = spawnSync(psql, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`CREATE DATABASE failed: ${(result.stderr || result.error?.message || '').trim()}`);
  const database = new URL(url);
  database.pathname = `/${name}`;
  return database.href;
}

/**
 * Another session that takes `table` in ACCESS EXCLUSIVE mode and keeps it, so every statement on it
 * waits. Resolves once the lock is held, to a function that releases it (and ends the session);
 * calling it again waits for the same end.
 */
export function holdTableLock(url, table) {
  const [psql, args] = psqlArgs(url);
  const session = spawn(psql, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const collect = (chunk) => {
      output += chunk;
      if (output.includes('locked\n')) {
        const ended = new Promise((done) => session.once('close', done));
        // Idempotent: a test releases it as soon as it can, and again when it ends, however it ends.
        resolve(() => {
          if (!session.stdin.writableEnded) session.stdin.end('ROLLBACK;\n');
          return ended;
        });
      }
    };
    session.stdout.on('data', collect);
    session.stderr.on('data', collect);
    session.once('error', reject);
    session.once('close', (code) => reject(new Error(`psql ended (exit ${code}) before the lock was held: ${output.trim()}`)));
    session.stdin.write(`BEGIN;\nLOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n`);
  });
}

/** A CA and a server certificate for 127.0.0.1 signed by it, made with the openssl command. */
function makeCertificates(tlsDir, owner) {
  mkdirSync(tlsDir);
  const openssl = (...args) => {
    const result = spawnSync('openssl', args, { cwd: tlsDir, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`openssl ${args[0]} failed: ${(result.stderr || result.error?.message || '').trim()}`);
  };
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=mcpferry test CA', '-keyout', 'ca.key', '-out', 'ca.crt');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr');
  writeFileSync(join(tlsDir, 'server.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'server.ext', '-out', 'server.crt');
  // Postgres refuses a key others can read, or one it does not own.
  chmodSync(join(tlsDir, 'server.key'), 0o600);
  if (owner) {
    chownSync(tlsDir, owner.uid, owner.gid);
    for (const file of ['server.key', 'server.crt']) chownSync(join(tlsDir, file), owner.uid, owner.gid);
  }
  return { cert: join(tlsDir, 'server.crt'), key: join(tlsDir, 'server.key'), caFile: join(tlsDir, 'ca.crt') };
}

async function start({ durable, tls }) {
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  try {
    const owner = asRoot ? postgresUser() : null;
    if (owner) chownSync(dir, owner.uid, owner.gid);
    const data = join(dir, 'data');
    const superuserPassword = randomBytes(12).toString('hex');
    const password = `pw-${randomBytes(12).toString('hex')}`;
    // initdb reads the superuser's password from a file only its user can read.
    const pwfile = join(dir, 'superuser-password');
    writeFileSync(pwfile, `${superuserPassword}\n`, { mode: 0o600 });
    if (owner) chownSync(pwfile, owner.uid, owner.gid);
    pg('initdb', ['-D', data, '-U', 'postgres', '--pwfile', pwfile, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-sync', '--no-instructions']);
    rmSync(pwfile);

    const certificates = tls ? makeCertificates(join(dir, 'tls'), owner) : null;
    const port = await freePort();
    const settings = [
      `listen_addresses = '127.0.0.1'`,
      `port = ${port}`,
      `unix_socket_directories = '${dir}'`,
      `max_connections = ${MAX_CONNECTIONS}`,
      ...(durable ? [] : ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off']),
      ...(certificates ? [`ssl = on`, `ssl_cert_file = '${certificates.cert}'`, `ssl_key_file = '${certificates.key}'`] : []),
    ];
    appendFileSync(join(data, 'postgresql.conf'), `\n# scripts/pg-cluster.mjs\n${settings.join('\n')}\n`);
    try {
      pgCtl(dir, 'start');
    } catch (error) {
      throw new Error(`${error.message}\nserver log:\n${logTail(dir)}`);
    }
    // Over the unix socket in the folder, as the superuser (trusted locally): the test user and its database.
    pg('psql', ['-h', dir, '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-q',
      '-c', `CREATE ROLE ${TEST_USER} LOGIN CREATEDB PASSWORD '${password}'`,
      '-c', `CREATE DATABASE ${TEST_DATABASE} OWNER ${TEST_USER}`]);

    const cluster = { url: `postgres://${TEST_USER}:${password}@127.0.0.1:${port}/${TEST_DATABASE}`, dir, port, durable, caFile: certificates?.caFile ?? null };
    writeFileSync(join(dir, 'cluster.json'), JSON.stringify(cluster));
    return cluster;
  } catch (error) {
    stop(dir);
    throw error;
  }
}

/** Stops the cluster in `dir` (if it runs) and deletes the folder: only a folder this script made. */
function stop(dir) {
  if (!basename(dir).startsWith(DIR_PREFIX)) throw new Error(`${dir} is not a folder made by pg-cluster.mjs`);
  if (existsSync(join(dir, 'data', 'postmaster.pid'))) pgCtl(dir, 'stop');
  rmSync(dir, { recursive: true, force: true });
}

async function serve(options) {
  const cluster = await start(options);
  let stopped = false;
  const finish = () => {
    if (!stopped) {
      stopped = true;
      stop(cluster.dir);
    }
    process.exit(0);
  };
  process.on('SIGTERM', finish);
  process.on('SIGINT', finish);
  process.on('SIGHUP', finish);
  process.stdout.write(`${JSON.stringify(cluster)}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const command = line.trim();
    try {
      if (command === 'stop') {
        pgCtl(cluster.dir, 'stop');
        process.stdout.write('stopped\n');
      } else if (command === 'start') {
        pgCtl(cluster.dir, 'start');
        process.stdout.write('started\n');
      } else if (command === 'restart') {
        pgCtl(cluster.dir, 'restart');
        process.stdout.write('restarted\n');
      } else if (command) {
        process.stdout.write(`error: unknown command ${JSON.stringify(command)}\n`);
      }
    } catch (error) {
      process.stdout.write(`error: ${error.message.replace(/\n/g, ' | ')}\n`);
    }
  }
  finish();
}

/** The command line, unless this file was imported. */
async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const durable = rest.includes('--durable');
  const tls = rest.includes('--tls');
  try {
    if (command === 'start') {
      process.stdout.write(`${JSON.stringify(await start({ durable, tls }))}\n`);
    } else if (command === 'stop' && rest[0]) {
      stop(rest[0]);
    } else if (command === 'serve') {
      await serve({ durable, tls });
    } else {
      console.error('usage: pg-cluster.mjs start [--durable] [--tls] | stop <dir> | serve [--durable] [--tls]');
      process.exit(2);
    }
  } catch (error) {
    console.error(`pg-cluster: ${error.message}`);
    process.exit(1);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
