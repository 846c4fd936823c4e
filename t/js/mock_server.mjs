// What the test servers share — the mock provider (t/mock/provider.mjs,
// Gw::Mock) and the SDK-built backends (mcp_backend.mjs, a2a_agent.mjs): a
// JSON reply, and the life of the HTTP server. Plain Node: no npm package. serve() listens on
// 127.0.0.1, port 0 (or $MOCK_PORT), prints {"port":N} as the only stdout
// line, and exits when stdin reaches EOF (unless MOCK_IGNORE_STDIN=1), when
// the parent goes away, on SIGTERM/SIGINT, or after $MOCK_MAX_LIFETIME_S
// seconds (default 1800).

export function sendJson(res, status, obj, headers = {}) {
  const body = Buffer.from(JSON.stringify(obj));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...headers });
  res.end(body);
}

// name: for the stderr line of the lifetime bound; onListen(port): runs
// before the port is printed.
export function serve(httpServer, name, onListen = () => {}) {
  const maxLifetimeS = Number(process.env.MOCK_MAX_LIFETIME_S ?? 1800);
  const sockets = new Set();
  httpServer.keepAliveTimeout = Number(process.env.MOCK_KEEPALIVE_MS ?? 60000);
  httpServer.headersTimeout = httpServer.keepAliveTimeout + 1000;
  httpServer.requestTimeout = 0;
  httpServer.on('connection', (sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
  });

  function shutdown(code = 0) {
    for (const s of sockets) s.destroy();
    httpServer.close();
    process.exit(code);
  }

  httpServer.listen(Number(process.env.MOCK_PORT ?? 0), '127.0.0.1', () => {
    const port = httpServer.address().port;
    onListen(port);
    process.stdout.write(JSON.stringify({ port }) + '\n');
  });
  process.on('SIGTERM', () => shutdown(0));
  process.on('SIGINT', () => shutdown(0));
  if (process.env.MOCK_IGNORE_STDIN !== '1') {
    process.stdin.on('end', () => shutdown(0));
    process.stdin.on('error', () => shutdown(0));
    process.stdin.resume();
  }
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) shutdown(0); }, 1000).unref();
  setTimeout(() => {
    process.stderr.write(`${name}: max lifetime ${maxLifetimeS}s reached, exiting\n`);
    shutdown(1);
  }, maxLifetimeS * 1000).unref();
}
