/**
 * Handing a job's image to its worker process through a file in shared memory (/dev/shm, a
 * tmpfs) instead of the IPC channel. The channel is a socket with a small buffer: a 3.6 MB photo
 * crosses it in about 55 rounds of "the server writes, the worker wakes up and reads", and the
 * worker runs at a lower priority, so the hand-over took 3-28 ms at concurrency 1 (median about
 * 14 ms); written to a file and read back in one call it took 2.6-3.8 ms in most runs
 * (bench/RESULTS.md). It also spares the event loop the channel's write callbacks and the
 * serialiser's two copies of the bytes.
 *
 * The spool is a private directory (mode 0700) per pool. The worker deletes a file as soon as it
 * has read it; the pool deletes it again when the job ends, for a worker that died first.
 * Directories left behind by a server killed outright are removed by the next server that starts.
 * Where /dev/shm is missing or not writable, there is no spool and the bytes go through the
 * channel as before; a write that fails (a full tmpfs) does the same for that job.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import path from "node:path";

/** The prefix of spool directories: palm-jobs-<server pid>-<random>. */
const PREFIX = "palm-jobs-";

/** JobSpool holds job files until their worker has read them. */
export interface JobSpool {
  /** The spool directory. */
  readonly dir: string;
  /** write stores `bytes` for job `id`; resolves with the file's path, or undefined when it could not be written. */
  write(id: number, bytes: Uint8Array): Promise<string | undefined>;
  /** remove deletes a job file if it is still there. */
  remove(file: string): void;
  /** close deletes the spool directory and whatever is left in it. */
  close(): void;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** removeStale deletes spool directories under `base` whose server process is gone. */
function removeStale(base: string): void {
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number(name.slice(PREFIX.length).split("-", 1)[0]);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || pidAlive(pid)) continue;
    rmSync(path.join(base, name), { recursive: true, force: true });
  }
}

/**
 * createJobSpool makes a spool directory under `base` (default /dev/shm); undefined where `base`
 * is not a writable directory.
 */
export function createJobSpool(base = "/dev/shm"): JobSpool | undefined {
  let dir: string;
  try {
    if (!statSync(base).isDirectory()) return undefined;
    removeStale(base);
    dir = mkdtempSync(path.join(base, `${PREFIX}${process.pid}-`));
  } catch {
    return undefined;
  }
  return {
    dir,
    async write(id, bytes) {
      const file = path.join(dir, `${id}.img`);
      try {
        await writeFile(file, bytes, { mode: 0o600 });
        return file;
      } catch {
        await rm(file, { force: true }).catch(() => {});
        return undefined;
      }
    },
    remove(file) {
      rm(file, { force: true }).catch(() => {});
    },
    close() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
