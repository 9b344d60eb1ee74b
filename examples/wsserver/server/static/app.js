// lobbyhost demo page: rendering on top of LobbyClient (lobbyhost-client.js,
// the browser client built from client/), which keeps the rules: a fresh
// ticket per attempt, the revision rule (the view never goes back; a gap is
// resynced from the next full state), reconnects with backoff within the
// grace, and a view that is not live while this page's own socket is down.
// This file only draws what the client says: while the view is not live
// the list is marked out of date and no host action is offered.
import { LobbyClient, TicketRefusedError } from './lobbyhost-client.js';

const $ = (id) => document.getElementById(id);
let client = null;
let user = '';
const shown = [];            // every revision drawn, in order (for tests)
let dropped = 0;             // states the revision rule dropped
let gaps = 0;                // gaps the client resynced over
const left = [];             // "user:reason" of every leave reported
const messages = new Map();  // messageId → {msg, readBy: Set, el}
const readsSent = new Set();
let lastTypingSent = 0;
let typingOff = null;

function log(text) {
  const li = document.createElement('li');
  li.textContent = `${new Date().toLocaleTimeString()}  ${text}`;
  $('log').prepend(li);
  while ($('log').children.length > 80) $('log').lastChild.remove();
}

function showError(text) {
  $('error').textContent = text;
  $('error').hidden = !text;
}

const secs = (ms) => Math.max(0, Math.ceil(ms / 1000));

// The page's words for the client's connection state: connected while
// open, removed when the server ended this page's place, disconnected when
// the page or the grace stopped it.
const removedText = {
  superseded: 'Another tab of yours took over: this page is out (the list below is out of date)',
  left: 'You left the lobby',
  lobby_full: 'The lobby is full',
  kicked: 'The host removed you from the lobby',
  lobby_locked: 'The lobby is locked: no new players',
  blocked: 'You are blocked from this lobby for now',
  protocol_error: 'Out of the lobby: protocol error',
};
function connName(c) {
  if (c.status === 'open') return 'connected';
  if (c.status === 'closed') return removedText[c.reason] ? 'removed' : 'disconnected';
  return c.status;
}

function renderConn() {
  if (!client) return;
  const c = client.connection;
  const el = $('conn-status');
  el.dataset.state = connName(c);
  el.dataset.attempt = String(c.attempt ?? 0);
  const now = Date.now();
  let text = connName(c);
  if (c.status === 'connecting' || c.status === 'reconnecting') {
    text += ` (attempt ${c.attempt}${c.retryAt > now ? `, next try in ${secs(c.retryAt - now)} s` : ''})`;
    const why = c.lastClose && (c.lastClose.code ? `${c.lastClose.code} ${c.lastClose.reason}` : c.lastClose.reason);
    if (why) text += ` (${why.trim()})`;
  }
  if (c.status === 'reconnecting') text += ` · your place is kept for ${secs(c.graceDeadline - now)} s`;
  if (c.status === 'closed') text += ` (${c.reason}${c.code ? ' ' + c.code : ''})`;
  el.textContent = text;
}

function button(cls, label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = cls;
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

function renderMembers() {
  const view = client && client.view;
  const list = $('members');
  list.replaceChildren();
  const live = !!view && view.live;
  list.classList.toggle('stale', !live);
  const iAmHost = client ? client.isHost() : false; // false whenever not live
  for (const m of view ? view.members : []) {
    const li = document.createElement('li');
    li.dataset.user = m.userId;
    li.dataset.status = m.status;
    li.classList.toggle('host', m.host);
    li.classList.toggle('reconnecting', m.status === 'reconnecting');
    li.classList.toggle('me', m.userId === user);
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = m.userId + (m.userId === user ? ' (you)' : '');
    const status = document.createElement('span');
    status.className = 'status';
    if (m.userId === user && !live) status.textContent = connName(client.connection); // our own state, not the server's last word
    else status.textContent = m.status === 'reconnecting' ? 'reconnecting…' : (m.host ? 'host' : 'online');
    if (m.status === 'reconnecting' && m.reconnectBy !== null) {
      const cd = document.createElement('span');
      cd.className = 'countdown';
      cd.dataset.deadline = String(m.reconnectBy);
      status.append(' ', cd);
    }
    const seq = document.createElement('span');
    seq.className = 'seq';
    seq.textContent = m.joinSeq ? `#${m.joinSeq}` : '';
    li.append(name, status, seq);
    const attrs = Object.entries(m.attrs).map(([k, v]) => `${k}=${v}`).join(' ');
    if (attrs) {
      const a = document.createElement('span');
      a.className = 'attrs';
      a.textContent = attrs;
      li.append(a);
    }
    // Host only; the server judges each request again. A kick blocks for a
    // minute, so that a reload does not bring the player straight back.
    if (iAmHost && m.userId !== user && m.status === 'online') li.append(button('make-host', 'Make host', () => client.transferHost(m.userId)));
    if (iAmHost && m.userId !== user) li.append(button('kick', 'Kick', () => client.kick(m.userId, 60000)));
    list.append(li);
  }
  const locked = !!view && view.locked;
  $('locked-badge').hidden = !locked;
  $('lock').hidden = !iAmHost;
  $('lock').textContent = locked ? 'Unlock' : 'Lock';
  $('revision').textContent = view ? String(view.revision) : '–';
  renderCountdowns();
  const role = $('role');
  if (!client) return;
  const c = client.connection;
  if (!live) {
    role.dataset.role = connName(c);
    role.textContent = {
      idle: '', connecting: 'Connecting…',
      reconnecting: 'Reconnecting… (the list below may be out of date)',
      disconnected: 'Disconnected (the list below may be out of date)',
      removed: removedText[c.reason],
    }[connName(c)] ?? connName(c);
  } else {
    const member = view.members.some((m) => m.userId === user);
    role.dataset.role = iAmHost ? 'host' : (member ? 'member' : 'none');
    role.textContent = iAmHost ? 'You are the host' : (member ? 'You are a member' : 'You are not in the lobby');
  }
}

// The time left until each reconnecting member's deadline, on the
// server's clock.
function renderCountdowns() {
  const view = client && client.view;
  if (!view) return;
  for (const el of document.querySelectorAll('#members .countdown')) {
    const m = view.members.find((x) => x.userId === el.closest('li').dataset.user);
    el.textContent = `${secs(m ? client.reconnectRemainingMs(m) ?? 0 : 0)} s left`;
  }
}

function addMessage(m) {
  let entry = messages.get(m.messageId);
  if (!entry) {
    const li = document.createElement('li');
    li.dataset.id = m.messageId;
    li.classList.toggle('mine', m.userId === user);
    const parts = ['author', 'text', 'time', 'receipts'].map((c) => {
      const s = document.createElement('span');
      s.className = c;
      return s;
    });
    parts[0].textContent = m.userId;
    parts[1].textContent = m.text;
    parts[2].textContent = m.time === null ? '' : new Date(m.time).toLocaleTimeString();
    li.append(...parts);
    $('messages').append(li);
    li.scrollIntoView({ block: 'nearest' });
    entry = { msg: m, readBy: new Set(), el: li };
    messages.set(m.messageId, entry);
  }
  for (const r of m.readBy) entry.readBy.add(r);
  renderReceipts(entry);
  markRead();
}

function renderReceipts(entry) {
  entry.el.querySelector('.receipts').textContent = entry.readBy.size ? `read by ${[...entry.readBy].join(', ')}` : '';
}

// A receipt for every message of others the user can see.
function markRead() {
  if (document.visibilityState !== 'visible' || !client || client.connection.status !== 'open') return;
  for (const [id, entry] of messages) {
    if (entry.msg.userId === user || readsSent.has(id) || entry.readBy.has(user)) continue;
    client.markRead(id);
    readsSent.add(id);
  }
}

function renderTyping(ids) {
  const who = ids.filter((u) => u !== user);
  $('typing').textContent = who.length ? `${who.join(', ')} ${who.length > 1 ? 'are' : 'is'} typing…` : '';
}

function setTyping(on) {
  if (client && client.connection.status === 'open') client.setTyping(on);
}

function join(newUser, room) {
  if (client) client.disconnect();
  user = newUser;
  shown.length = 0;
  left.length = 0;
  messages.clear();
  readsSent.clear();
  $('messages').replaceChildren();
  $('room-name').textContent = room;
  $('lobby').hidden = false;
  history.replaceState(null, '', `?${new URLSearchParams({ user, room })}`);
  const c = new LobbyClient({
    roomId: room,
    getTicket: async (roomId) => {
      const res = await fetch(`/rooms/${encodeURIComponent(roomId)}/socket-ticket`, {
        method: 'POST', headers: { 'x-authenticated-user': user },
      });
      const body = await res.json().catch(() => ({}));
      if (res.status === 401 || res.status === 400) throw new TicketRefusedError(`ticket refused: ${body.message ?? res.status}`);
      if (res.status !== 201) throw new Error(`ticket: ${res.status} ${body.message ?? ''}`);
      return body;
    },
  });
  client = c;
  const mine = (fn) => (...a) => { if (client === c) fn(...a); };
  c.on('connection', mine((s) => {
    if (s.status === 'open') showError('');
    log(`connection ${s.status}${s.attempt ? ' attempt ' + s.attempt : ''}${s.reason ? ' ' + s.reason : ''}`);
    if (s.status !== 'open') renderTyping([]);
    renderConn();
    renderMembers();
    markRead();
  }));
  c.on('sync', mine((view, info) => {
    if (shown[shown.length - 1] !== view.revision) shown.push(view.revision);
    renderMembers();
    const what = view.reason === 'snapshot' ? 'snapshot' : `${view.reason}${view.subjectId ? ' · ' + view.subjectId : ''}`;
    $('last-change').textContent = `rev ${view.revision}: ${what}`;
    if (info.gap) log(`resynced at revision ${view.revision} after a gap`);
  }));
  c.on('hostChange', mine((h) => log(`host ${h.hostId ?? 'none'} (term ${h.term})`)));
  c.on('leave', mine((m, reason) => { left.push(`${m.userId}:${reason}`); log(`${m.userId} left (${reason})`); }));
  c.on('revisionDropped', mine((d) => { dropped++; log(`dropped ${d.verdict} revision ${d.revision} (have ${d.highest})`); }));
  c.on('gap', mine((g) => { gaps++; log(`revisions after ${g.from} and before ${g.to} never arrived`); }));
  c.on('chatHistory', mine((ms) => ms.forEach(addMessage)));
  c.on('chat', mine(addMessage));
  c.on('read', mine((r) => {
    const entry = messages.get(r.messageId);
    if (entry) { entry.readBy.add(r.userId); renderReceipts(entry); }
  }));
  c.on('typingState', mine(renderTyping));
  c.on('serverError', mine((e) => { showError(`${e.code}: ${e.message}`); log(`error ${e.code}`); }));
  c.connect();
}

$('join-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const u = $('user').value;
  const r = $('room').value;
  if (u.trim() && r.trim()) join(u, r);
});
$('chat-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('chat-input').value;
  if (!text.trim() || !client || client.connection.status !== 'open') return;
  client.sendChat(text);
  $('chat-input').value = '';
  clearTimeout(typingOff);
  lastTypingSent = 0;
  setTyping(false);
});
$('chat-input').addEventListener('input', () => {
  if (Date.now() - lastTypingSent > 2000) { setTyping(true); lastTypingSent = Date.now(); }
  clearTimeout(typingOff);
  typingOff = setTimeout(() => { lastTypingSent = 0; setTyping(false); }, 3000);
});
$('drop').addEventListener('click', () => client && client.disconnect());
$('lock').addEventListener('click', () => client && client.view && client.lock(!client.view.locked));
$('reconnect').addEventListener('click', () => client && client.connect());
document.addEventListener('visibilitychange', markRead);
setInterval(() => { renderConn(); renderCountdowns(); }, 1000);

// For debugging and the browser tests: what the page holds.
window.lobbyhost = Object.freeze({
  view: () => ({
    revision: client ? client.revision : -1, shown: [...shown], dropped, gaps, left: [...left],
    host: client && client.view ? client.view.hostId : null, term: client && client.view ? client.view.term : 0, isHost: client ? client.isHost() : false,
    conn: client ? connName(client.connection) : 'idle', status: client ? client.connection.status : 'idle',
    attempt: client ? client.connection.attempt ?? 0 : 0,
    retryScheduled: !!client && (client.connection.status === 'reconnecting' || client.connection.status === 'connecting'),
  }),
});

// ?user=…&room=… fills the form and joins, for bookmarks and tests.
const params = new URLSearchParams(location.search);
if (params.get('user') && params.get('room')) {
  $('user').value = params.get('user');
  $('room').value = params.get('room');
  $('join-form').requestSubmit();
}
