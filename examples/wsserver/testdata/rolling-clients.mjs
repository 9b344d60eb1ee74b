// Players for the rolling-restart test: each a LobbyClient from the
// committed bundle (client/dist/lobbyhost-client.js), under Node, so the
// reconnect rules exercised are the library's own. Run as
//
//   node --experimental-websocket rolling-clients.mjs <bundle path> <config JSON, or @file>
//
// config: {"base": "http://front", "players": [{"room": "...", "user": "..."}]}.
// Every event is one JSON line on stdout; a line "quit" on stdin
// disconnects everybody and exits.
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';

const [bundle, configArg] = process.argv.slice(2);
// "@file" names a file holding the configuration (a large run's would not
// fit on a command line).
const configJSON = configArg.startsWith('@')
  ? (await import('node:fs')).readFileSync(configArg.slice(1), 'utf8')
  : configArg;
const { LobbyClient } = await import(pathToFileURL(bundle).href);
const { base, players } = JSON.parse(configJSON);
const wsBase = base.replace(/^http/, 'ws');
const out = (ev) => process.stdout.write(JSON.stringify(ev) + '\n');

const clients = players.map(({ room, user }) => {
  const c = new LobbyClient({
    roomId: room,
    url: `${wsBase}/rooms/${encodeURIComponent(room)}/socket`,
    getTicket: async (roomId) => {
      const res = await fetch(`${base}/rooms/${encodeURIComponent(roomId)}/socket-ticket`, {
        method: 'POST', headers: { 'x-authenticated-user': user },
      });
      if (res.status !== 201) throw new Error(`ticket: ${res.status}`);
      return res.json();
    },
  });
  // fresh: a socket was welcomed and its first states are being applied;
  // a gap then is the resync of a reconnect, not a revision this socket lost.
  let fresh = false;
  const id = { room, user };
  c.on('connection', (s) => out({ ...id, ev: 'conn', status: s.status, reason: s.reason ?? null, code: s.code ?? null, attempt: s.attempt ?? 0 }));
  c.on('welcome', () => { fresh = true; });
  c.on('gap', (g) => out({ ...id, ev: 'gap', from: g.from, to: g.to, onReconnect: fresh }));
  c.on('sync', (v, info) => {
    if (info.cause === 'open') fresh = false;
    out({
      ...id, ev: 'sync', cause: info.cause, revision: v.revision, term: v.term, host: v.hostId,
      online: v.members.filter((m) => m.status === 'online').map((m) => m.userId),
    });
  });
  c.on('hostChange', (h) => out({ ...id, ev: 'host', host: h.hostId, term: h.term, previousTerm: h.previousTerm }));
  c.on('leave', (m, reason) => out({ ...id, ev: 'leave', member: m.userId, reason }));
  c.on('revisionDropped', (d) => out({ ...id, ev: 'dropped', revision: d.revision }));
  c.connect();
  return c;
});

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'quit') {
    for (const c of clients) c.disconnect();
    process.exit(0);
  }
});
