/**
 * Free loopback ports: for the servers, redis-servers and other processes that tests and the
 * benchmark start.
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
