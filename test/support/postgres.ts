/**
 * A throw-away PostgreSQL cluster for the tests and CI, from the server binaries already on the
 * machine (Debian's /usr/lib/postgresql/<n>/bin, `pg_ctl` on PATH, or TOKEN_TERMINATOR_PG_BINDIR).
 * PostgreSQL refuses to run as root, so as root every server command runs as the `postgres` user
 * (runuser) in a temp directory it owns. The cluster listens on 127.0.0.1 and a free port, has
 * TLS on (a self-signed certificate made with openssl, for the TLS pass-through test) and pg_trgm
 * created in `public` of the `postgres` database.
 *
 * A cluster this process started is stopped and its directory removed when the process exits or
 * is interrupted (SIGINT, SIGTERM, SIGHUP), so stopping a run never leaves a server behind.
 *
 * Also a command line for .ci/run:
 *   node --import tsx test/support/postgres.ts start <dir>   # prints the URL
 *   node --import tsx test/support/postgres.ts stop <dir>
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface Cluster {
  readonly dir: string;
  readonly port: number;
  /** Superuser URL of the `postgres` database. */
  readonly url: string;
  /** The self-signed server certificate (PEM file), for `sslrootcert`. */
  readonly certFile: string;
}

/** Where initdb and pg_ctl are, or a clear error naming what was looked for. */
export function findBinDir(): string {
  const fromEnv = process.env['TOKEN_TERMINATOR_PG_BINDIR'];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!existsSync(join(fromEnv, 'initdb')))
      throw new Error(`PostgreSQL server binaries not found: TOKEN_TERMINATOR_PG_BINDIR=${fromEnv} has no initdb`);
    return fromEnv;
  }
  const onPath = spawnSync('sh', ['-c', 'command -v pg_ctl'], { encoding: 'utf8' }).stdout.trim();
  if (onPath !== '') return onPath.slice(0, onPath.lastIndexOf('/'));
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) {
    throw new Error(
      'PostgreSQL server binaries not found (TOKEN_TERMINATOR_PG_BINDIR, pg_ctl on PATH, /usr/lib/postgresql/*/bin): ' +
        'install postgresql (Debian: apt-get install postgresql) or set TOKEN_TERMINATOR_TEST_PG_URL',
    );
  }
  return join(root, newest, 'bin');
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** Run a server command, as the postgres user when we are root. */
function runServerCommand(bin: string, args: readonly string[]): string {
  const [file, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, [...args]];
  try {
    return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${[bin, ...args].join(' ')} failed: ${e.stderr || e.stdout || e.message}`, { cause: error });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

function owner(): { uid: number; gid: number } | undefined {
  if (!isRoot()) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined)
    throw new Error('running as root, but there is no postgres user to run the server as');
  return { uid: Number(uid), gid: Number(gid) };
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** Clusters this process started that are still up: directory → stop-now, and drop-the-hooks. */
const running = new Map<string, { readonly stop: () => void; readonly release: () => void }>();

/**
 * Stop the cluster in `dir` and remove the directory when this process exits or gets SIGINT,
 * SIGTERM or SIGHUP (then the signal goes on as it would have: to the runner's own handler, or
 * the default action when there is none). Returns an idempotent stop-now that also drops the hooks.
 */
export function stopOnExit(dir: string): () => void {
  const known = running.get(dir);
  if (known !== undefined) return known.stop;
  let done = false;
  const release = (): void => {
    done = true;
    running.delete(dir);
    process.off('exit', stop);
    for (const signal of SIGNALS) process.off(signal, onSignal);
  };
  const stop = (): void => {
    if (done) return;
    release();
    try {
      stopCluster(dir);
    } catch {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    stop();
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  process.once('exit', stop);
  for (const signal of SIGNALS) process.once(signal, onSignal);
  running.set(dir, { stop, release });
  return stop;
}

/** Leave the cluster in `dir` running after this process ends (the `start` command line). */
export function keepRunning(dir: string): void {
  running.get(dir)?.release();
}

/** initdb + a self-signed certificate + pg_ctl start in `dir` (created, emptied first). */
export async function startCluster(dir: string): Promise<Cluster> {
  const bin = findBinDir();
  stopOnExit(dir);
  const data = join(dir, 'data');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const who = owner();
  if (who !== undefined) chownSync(dir, who.uid, who.gid);
  runServerCommand(join(bin, 'initdb'), [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'postgres',
    '-E',
    'UTF8',
    '--locale=C.UTF-8',
    '--no-sync',
  ]);
  const certFile = join(dir, 'server.crt');
  const keyFile = join(dir, 'server.key');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  chmodSync(keyFile, 0o600);
  if (who !== undefined) for (const f of [certFile, keyFile]) chownSync(f, who.uid, who.gid);
  const settings = [
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'max_connections = 300',
    'fsync = off',
    'full_page_writes = off',
    'ssl = on',
    `ssl_cert_file = '${certFile}'`,
    `ssl_key_file = '${keyFile}'`,
  ];
  writeFileSync(join(data, 'postgresql.auto.conf'), `${settings.join('\n')}\n`);
  if (who !== undefined) chownSync(join(data, 'postgresql.auto.conf'), who.uid, who.gid);
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      runServerCommand(join(bin, 'pg_ctl'), [
        '-D',
        data,
        '-o',
        `-p ${port}`,
        '-l',
        join(dir, 'server.log'),
        '-w',
        '-t',
        '60',
        'start',
      ]);
    } catch (error) {
      lastError = error; // the port was taken between the probe and the start: try another one
      continue;
    }
    writeFileSync(join(dir, 'port'), String(port));
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public');
    } finally {
      await client.end();
    }
    return { dir, port, url, certFile };
  }
  throw new Error(
    `could not start PostgreSQL: ${String(lastError)}\n${existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8').slice(-2000) : ''}`,
  );
}

/** Stop the cluster in `dir` (fast shutdown) and remove the directory. */
export function stopCluster(dir: string): void {
  const hook = running.get(dir);
  if (hook !== undefined) return hook.stop(); // drops the exit hooks, then comes back here
  const data = join(dir, 'data');
  if (existsSync(join(data, 'postmaster.pid')))
    runServerCommand(join(findBinDir(), 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
  rmSync(dir, { recursive: true, force: true });
}

/** Restart a stopped cluster on its port (fault tests stop the server mid-session). */
export function pgCtl(dir: string, action: 'stop' | 'start', mode: 'fast' | 'immediate' = 'immediate'): void {
  const data = join(dir, 'data');
  const port = readFileSync(join(dir, 'port'), 'utf8').trim();
  const args =
    action === 'stop'
      ? ['-D', data, '-m', mode, '-w', 'stop']
      : ['-D', data, '-o', `-p ${port}`, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start'];
  runServerCommand(join(findBinDir(), 'pg_ctl'), args);
}

/**
 * A private schema in the database of `url` for one test (or one vault): created empty, with
 * `public` (where pg_trgm lives) after it on the search path. Returns the URL that selects it and
 * a drop function.
 */
export async function freshSchema(
  url: string,
  prefix = 't',
): Promise<{ url: string; schema: string; drop: () => Promise<void> }> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await client.end();
  }
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema},public`);
  return {
    url: u.toString(),
    schema,
    drop: async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await c.end();
      }
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [action, dir] = process.argv.slice(2);
  if ((action !== 'start' && action !== 'stop') || dir === undefined) {
    process.stderr.write('usage: postgres.ts start|stop <dir>\n');
    process.exit(2);
  }
  if (action === 'start') {
    const { url } = await startCluster(dir);
    keepRunning(dir); // .ci/run stops it with `stop` when it is done
    process.stdout.write(`${url}\n`);
  } else stopCluster(dir);
}
