/**
 * `node --import tsx bench/_floor-proxy.ts <upstream>`: the floor of any gateway that looks into
 * request bodies, for `npm run bench -- proxy`. node:http in front, one keep-alive undici Agent
 * behind (as the proxy), and per request only what no such gateway can skip: read the whole body,
 * JSON.parse it, JSON.stringify it, send it upstream and relay the answer as it arrives. No
 * session, no store, no stages, no accounting. Prints `listening on http://…` on stderr.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, type Dispatcher } from 'undici';

const upstream = process.argv[2] ?? 'http://127.0.0.1:1';
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'content-length']);

const server = createServer({ noDelay: true, keepAlive: true }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    void (async () => {
      const body = Buffer.from(JSON.stringify(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown));
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      const r = await agent.request({
        origin: upstream,
        path: req.url ?? '/',
        method: (req.method ?? 'POST') as Dispatcher.HttpMethod,
        headers,
        body,
      });
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
      res.writeHead(r.statusCode, out);
      res.flushHeaders();
      for await (const c of r.body) res.write(c as Buffer);
      res.end();
    })().catch(() => res.destroy());
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () =>
  process.stderr.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
);
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void agent.close().then(() => process.exit(0)));
});
