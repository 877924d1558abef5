/**
 * The vault's view of its own health: a SQLite file deleted or replaced under an open connection (its
 * identity is compared before every write), a damaged one (the first corruption error runs the integrity
 * check once), a read-only one. A failing state is reported by `status`, printed once on stderr, and
 * makes every write refuse (VaultHealthError), so stages fail open; intact artifacts are still read.
 */
import { statSync } from 'node:fs';
import type { HealthMonitor } from './dialect.js';
import { VaultHealthError } from './errors.js';
import type { VaultHealth } from './ports.js';

export interface HealthProbe {
  /** The store file's state now compared with the one opened: undefined while it is the same file. */
  fileState?(): 'deleted' | 'replaced' | undefined;
  /** Run the integrity check: undefined when it passes, else its first finding (content-free). */
  integrity?(): string | undefined;
}

const CORRUPTION = /^SQLITE_(CORRUPT|NOTADB)/;

const MESSAGES: Record<Exclude<VaultHealth['state'], 'ok'>, string> = {
  deleted:
    'was deleted while open: new evidence would be lost at restart, so nothing more is stored or reduced; recovery of what this process stored still works until it exits',
  replaced:
    'was replaced by another file while open: nothing more is stored or reduced by this process; restart it to use the new file',
  corrupt:
    'is damaged (integrity check failed): nothing more is stored or reduced; intact artifacts are still recovered, each verified by its hash',
  read_only: 'could only be opened read-only: nothing is stored or reduced; existing receipts are still recovered',
};
const CODES: Record<Exclude<VaultHealth['state'], 'ok'>, 'E_VAULT_GONE' | 'E_VAULT_CORRUPT' | 'E_VAULT_READ_ONLY'> = {
  deleted: 'E_VAULT_GONE',
  replaced: 'E_VAULT_GONE',
  corrupt: 'E_VAULT_CORRUPT',
  read_only: 'E_VAULT_READ_ONLY',
};

/** Print a health change once per state of one vault (`warned` is the monitor's own; never content). */
function warnOnce(warned: Set<VaultHealth['state']>, location: string, health: VaultHealth): void {
  if (health.state === 'ok' || warned.has(health.state)) return;
  warned.add(health.state);
  try {
    process.stderr.write(
      `token-terminator: the vault at ${location} ${MESSAGES[health.state]}${health.detail === undefined ? '' : ` (${health.detail})`}\n`,
    );
  } catch {
    // a closed stderr must not stop the host
  }
}

/** A monitor over `probe`; `initial` is the state the store was opened in (read-only, corrupt). */
export function createHealthMonitor(
  location: string,
  probe: HealthProbe,
  initial: VaultHealth = { state: 'ok' },
): HealthMonitor {
  let health: VaultHealth = Object.freeze({ ...initial });
  let checked = initial.state === 'corrupt';
  const warned = new Set<VaultHealth['state']>();
  warnOnce(warned, location, health);
  const set = (next: VaultHealth): void => {
    health = Object.freeze(next);
    warnOnce(warned, location, health);
  };
  const current = (): VaultHealth => {
    if (health.state === 'ok' || health.state === 'read_only') {
      const file = probe.fileState?.();
      if (file !== undefined) set({ state: file });
    }
    return health;
  };
  return {
    current,
    assertWritable() {
      const h = current();
      if (h.state !== 'ok')
        throw new VaultHealthError(CODES[h.state], h.state, `the vault at ${location} ${MESSAGES[h.state]}`);
    },
    observe(error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (typeof code !== 'string' || !CORRUPTION.test(code) || checked) return;
      checked = true;
      let finding: string | undefined;
      try {
        finding = probe.integrity?.();
      } catch (e) {
        const failed = (e as { code?: unknown } | null)?.code;
        finding = failed === undefined ? 'integrity check failed' : String(failed);
      }
      if (finding !== undefined && health.state !== 'deleted' && health.state !== 'replaced')
        set({ state: 'corrupt', detail: finding });
    },
  };
}

/** A probe of a file's identity: the device and inode it had when opened. */
export function fileIdentity(path: string): () => 'deleted' | 'replaced' | undefined {
  const opened = statSync(path);
  return () => {
    try {
      const now = statSync(path);
      return now.ino === opened.ino && now.dev === opened.dev ? undefined : 'replaced';
    } catch (error) {
      return (error as { code?: unknown }).code === 'ENOENT' ? 'deleted' : undefined;
    }
  };
}
