/**
 * Free loopback ports, and waiting for something to listen on one: for the servers, redis-servers
 * and other processes that tests and the benchmark start.
 */
import net from "node:net";

/** freePort asks the OS for a free TCP port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** waitForPort polls until something accepts TCP connections on 127.0.0.1:`port`. */
export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, "127.0.0.1");
      c.once("connect", () => (c.end(), resolve(true)));
      c.once("error", () => (c.destroy(), resolve(false)));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
