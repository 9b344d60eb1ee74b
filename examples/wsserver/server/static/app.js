// lobbyhost demo page: joins a room over a WebSocket and renders the lobby.
//
// The revision rule: the page keeps the highest lobby revision it rendered
// and ignores any lobby.state that is not newer, so a late or duplicated
// message can never roll the view back (also across reconnects to the same
// room).
//
// The honesty rule: the member list is what the server last said, and it
// is only live while this page's own socket is open. Without a socket the
// page shows its own state (connecting, reconnecting, disconnected,
// removed), marks the list as stale, and never claims the host role or
// offers host actions: the server may have moved on without telling it.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  const st = {
    user: '',
    room: '',
    ws: null,
    highest: -1,        // highest revision rendered; -1: none yet
    ignored: 0,         // stale states dropped by the revision rule
    manualDrop: false,  // the user pressed "Drop socket": no auto-reconnect
    retries: 0,
    retryTimer: null,
    retryAt: 0,         // when the scheduled reconnect runs (Date.now())
    // This page's own connection: idle, connecting, connected,
    // reconnecting (a retry is scheduled), disconnected (no retry), or
    // removed (the server ended this page's place: superseded, left, full).
    conn: 'idle',
    connDetail: '',
    graceMs: 0,         // from welcome: how long the server keeps our place
    lostAt: 0,          // when our socket closed (Date.now()), 0 while open
    clockSkew: 0,       // server time minus Date.now(), from lobby.state
    tick: null,         // the one-second timer for countdowns
    userAsked: false,   // the next connect was asked for by the user
    members: [],
    host: null,
    locked: false,      // the lobby refuses new players
    messages: new Map(), // messageId → {msg, readBy:Set, el}
    typing: new Map(),   // userId → timer
    readsSent: new Set(),
    lastTypingSent: 0,
    typingOffTimer: null,
    heartbeatTimer: null,
  };

  function log(text) {
    const li = document.createElement('li');
    li.textContent = `${new Date().toLocaleTimeString()}  ${text}`;
    const list = $('log');
    list.prepend(li);
    while (list.children.length > 80) list.lastChild.remove();
  }

  function showError(text) {
    const el = $('error');
    el.textContent = text;
    el.hidden = !text;
  }

  function setConn(state, detail) {
    st.conn = state;
    st.connDetail = detail || '';
    renderConn();
    renderMembers();
  }

  // live reports whether the member list is current: only while this
  // page's socket is open.
  function live() {
    return st.conn === 'connected';
  }

  function secondsLeft(deadlineMs) {
    return Math.max(0, Math.ceil((deadlineMs - Date.now()) / 1000));
  }

  function renderConn() {
    const el = $('conn-status');
    el.dataset.state = st.conn;
    let text = st.conn;
    if (st.conn === 'reconnecting' && st.retryAt) text += ` (next try in ${secondsLeft(st.retryAt)} s)`;
    if (st.connDetail) text += ` (${st.connDetail})`;
    // While we have no socket the server keeps our place for the grace.
    if ((st.conn === 'reconnecting' || st.conn === 'disconnected') && st.lostAt && st.graceMs) {
      const left = secondsLeft(st.lostAt + st.graceMs);
      text += left > 0 ? ` · your place is kept for ${left} s` : ' · your place has probably been given up';
    }
    el.textContent = text;
  }

  function startTicking() {
    if (!st.tick) st.tick = setInterval(() => { renderConn(); renderCountdowns(); }, 1000);
  }

  function send(msg) {
    const ws = st.ws;
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify(msg));
      return true;
    }
    return false;
  }

  async function getTicket() {
    const res = await fetch(`/rooms/${encodeURIComponent(st.room)}/socket-ticket`, {
      method: 'POST',
      headers: { 'x-authenticated-user': st.user },
    });
    if (res.status !== 201) {
      let why = `${res.status}`;
      try { why += ` ${(await res.json()).message}`; } catch (_) { /* not JSON */ }
      throw new Error(`ticket refused: ${why}`);
    }
    return (await res.json()).ticket;
  }

  async function connect() {
    clearTimeout(st.retryTimer);
    if (st.ws) return;
    if (st.conn === 'removed' && !st.userAsked) return;
    st.userAsked = false;
    st.manualDrop = false;
    st.retryAt = 0;
    setConn('connecting');
    let ticket;
    try {
      ticket = await getTicket();
    } catch (e) {
      setConn(scheduleRetry() ? 'reconnecting' : 'disconnected', e.message);
      return;
    }
    if (st.ws) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${proto}//${location.host}/rooms/${encodeURIComponent(st.room)}/socket?ticket=${encodeURIComponent(ticket)}`;
    const ws = new WebSocket(url);
    st.ws = ws;
    ws.onopen = () => {
      if (st.ws !== ws) return;
      showError('');
      st.retries = 0;
      st.lostAt = 0;
      setConn('connected');
      log('socket open');
    };
    ws.onmessage = (ev) => {
      if (st.ws !== ws) return;
      let msg;
      try { msg = JSON.parse(ev.data); } catch (_) { return; }
      handle(msg);
    };
    ws.onclose = (ev) => {
      if (st.ws !== ws) return; // a socket this page already replaced
      st.ws = null;
      clearInterval(st.heartbeatTimer);
      clearTypingAll();
      if (!st.lostAt) st.lostAt = Date.now();
      log(`socket closed ${ev.code} ${ev.reason}`);
      // 4002: a newer tab (here or on another server) took over: coming
      // back would take the place from it, and it would come back in
      // turn. 4003: we left. 4009: the lobby is full. 4010: the host
      // kicked us. 4011: the lobby is locked. 4012: a kick still blocks
      // us. None of them is retried; anything else that we did not ask
      // for is worth a reconnect within the grace.
      const removed = {
        4002: 'another tab took over', 4003: 'you left', 4009: 'the lobby is full',
        4010: 'the host removed you', 4011: 'the lobby is locked', 4012: 'you are blocked from this lobby',
      }[ev.code];
      if (removed) {
        setConn('removed', removed);
        return;
      }
      const why = `${ev.code}${ev.reason ? ' ' + ev.reason : ''}`;
      if (st.manualDrop || !scheduleRetry()) setConn('disconnected', why);
      else setConn('reconnecting', why);
    };
  }

  // scheduleRetry arranges a reconnect with backoff and reports whether
  // it did.
  function scheduleRetry() {
    if (st.manualDrop || st.retries >= 6) return false;
    const delay = Math.min(8000, 500 * 2 ** st.retries);
    st.retries++;
    clearTimeout(st.retryTimer);
    st.retryAt = Date.now() + delay;
    st.retryTimer = setTimeout(connect, delay);
    return true;
  }

  function drop() {
    st.manualDrop = true;
    clearTimeout(st.retryTimer);
    st.retryAt = 0;
    if (st.ws) st.ws.close(1000, 'dropped by the user');
  }

  function handle(msg) {
    switch (msg.type) {
      case 'lobby.state': return onState(msg);
      case 'welcome':
        log(`attached as connection ${msg.connection}`);
        if (typeof msg.graceMs === 'number') st.graceMs = msg.graceMs;
        clearInterval(st.heartbeatTimer);
        // Browsers answer WebSocket pings by themselves; the app heartbeat
        // is a second signal for proxies that eat pings.
        if (msg.heartbeatMs > 0) st.heartbeatTimer = setInterval(() => send({ type: 'heartbeat' }), Math.max(1000, msg.heartbeatMs));
        return;
      case 'chat.history':
        for (const m of msg.messages) addMessage(m);
        return;
      case 'chat.message': return addMessage(msg);
      case 'message.read': return addReceipt(msg.messageId, msg.userId);
      case 'typing': return setTyping(msg.userId, msg.typing);
      case 'typing.state':
        clearTypingAll();
        for (const u of msg.userIds) setTyping(u, true);
        return;
      case 'error':
        showError(`${msg.code}: ${msg.message}`);
        log(`error ${msg.code} (${msg.requestType || '-'})`);
        return;
      default:
        return; // pong and anything newer than this page
    }
  }

  function onState(msg) {
    if (typeof msg.version !== 'number') return;
    if (msg.version <= st.highest) {
      st.ignored++;
      log(`ignored stale revision ${msg.version} (have ${st.highest})`);
      return;
    }
    st.highest = msg.version;
    st.host = msg.hostId;
    st.locked = msg.locked === true;
    const server = Date.parse(msg.serverTime);
    if (!isNaN(server)) st.clockSkew = server - Date.now();
    st.members = Array.isArray(msg.members)
      ? msg.members
      : (msg.playerIds || []).map((id) => ({ userId: id, status: 'online', joinSeq: 0, host: id === msg.hostId }));
    $('revision').textContent = String(msg.version);
    renderMembers();
    const what = msg.reason === 'snapshot' ? 'snapshot' : `${msg.reason}${msg.subjectId ? ' · ' + msg.subjectId : ''}`;
    $('last-change').textContent = `rev ${msg.version}: ${what}`;
    log(`rev ${msg.version} ${what} host=${msg.hostId ?? 'none'}`);
  }

  function renderMembers() {
    const list = $('members');
    list.replaceChildren();
    const isLive = live();
    list.classList.toggle('stale', !isLive);
    // Host actions only while the list is live: a page without a socket
    // does not know whether it still hosts.
    const iAmHost = isLive && st.host === st.user;
    for (const m of st.members) {
      const li = document.createElement('li');
      li.dataset.user = m.userId;
      li.dataset.status = m.status;
      if (m.userId === st.host) li.classList.add('host');
      if (m.status === 'reconnecting') li.classList.add('reconnecting');
      if (m.userId === st.user) li.classList.add('me');
      const name = document.createElement('span');
      name.className = 'name';
      name.textContent = m.userId + (m.userId === st.user ? ' (you)' : '');
      const status = document.createElement('span');
      status.className = 'status';
      if (m.userId === st.user && !isLive) {
        status.textContent = st.conn; // our own state, not the server's last word
      } else {
        status.textContent = m.status === 'reconnecting' ? 'reconnecting…' : (m.userId === st.host ? 'host' : 'online');
      }
      // The reconnect deadline (reconnect_deadline, or reconnectBy from
      // older servers): count down to it on the server's clock.
      const reconnectBy = m.reconnect_deadline || m.reconnectBy;
      if (m.status === 'reconnecting' && reconnectBy) {
        const deadline = Date.parse(reconnectBy);
        if (!isNaN(deadline)) {
          const cd = document.createElement('span');
          cd.className = 'countdown';
          cd.dataset.deadline = reconnectBy;
          status.append(' ', cd);
        }
      }
      const seq = document.createElement('span');
      seq.className = 'seq';
      seq.textContent = m.joinSeq ? `#${m.joinSeq}` : '';
      li.append(name, status, seq);
      const attrs = m.attrs && Object.keys(m.attrs).length
        ? Object.entries(m.attrs).map(([k, v]) => `${k}=${v}`).join(' ') : '';
      if (attrs) {
        const a = document.createElement('span');
        a.className = 'attrs';
        a.textContent = attrs;
        li.append(a);
      }
      if (iAmHost && m.userId !== st.user && m.status === 'online') {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'make-host';
        b.textContent = 'Make host';
        b.addEventListener('click', () => send({ type: 'host.transfer', to: m.userId }));
        li.append(b);
      }
      // Host only, and the server judges again: kick with a one-minute
      // block, so that a reload does not bring the player straight back.
      if (iAmHost && m.userId !== st.user) {
        const k = document.createElement('button');
        k.type = 'button';
        k.className = 'kick';
        k.textContent = 'Kick';
        k.addEventListener('click', () => send({ type: 'kick', target: m.userId, block_ms: 60000 }));
        li.append(k);
      }
      list.append(li);
    }
    $('locked-badge').hidden = !st.locked;
    const lock = $('lock');
    lock.hidden = !iAmHost;
    lock.textContent = st.locked ? 'Unlock' : 'Lock';
    lock.dataset.locked = String(st.locked);
    renderCountdowns();
    const role = $('role');
    const member = st.members.some((m) => m.userId === st.user);
    if (!isLive) {
      role.dataset.role = st.conn;
      role.textContent = {
        idle: '',
        connecting: 'Connecting…',
        reconnecting: 'Reconnecting… (the list below may be out of date)',
        disconnected: 'Disconnected (the list below may be out of date)',
        removed: {
          'another tab took over': 'Another tab of yours took over: this page is out (the list below is out of date)',
          'you left': 'You left the lobby',
          'the lobby is full': 'The lobby is full',
          'the host removed you': 'The host removed you from the lobby',
          'the lobby is locked': 'The lobby is locked: no new players',
          'you are blocked from this lobby': 'You are blocked from this lobby for now',
        }[st.connDetail] || 'Out of the lobby (the list below is out of date)',
      }[st.conn] || st.conn;
    } else {
      role.dataset.role = iAmHost ? 'host' : (member ? 'member' : 'none');
      role.textContent = iAmHost ? 'You are the host' : (member ? 'You are a member' : 'You are not in the lobby');
    }
  }

  // renderCountdowns updates every reconnect countdown: the time left
  // until the member's reconnect deadline, on the server's clock.
  function renderCountdowns() {
    for (const el of document.querySelectorAll('#members .countdown')) {
      const left = secondsLeft(Date.parse(el.dataset.deadline) - st.clockSkew);
      el.textContent = `${left} s left`;
    }
  }

  function addMessage(m) {
    let entry = st.messages.get(m.messageId);
    if (!entry) {
      const li = document.createElement('li');
      li.dataset.id = m.messageId;
      if (m.userId === st.user) li.classList.add('mine');
      const author = document.createElement('span');
      author.className = 'author';
      author.textContent = m.userId;
      const text = document.createElement('span');
      text.className = 'text';
      text.textContent = m.text;
      const time = document.createElement('span');
      time.className = 'time';
      const t = new Date(m.time);
      time.textContent = isNaN(t) ? '' : t.toLocaleTimeString();
      const receipts = document.createElement('span');
      receipts.className = 'receipts';
      li.append(author, text, time, receipts);
      $('messages').append(li);
      li.scrollIntoView({ block: 'nearest' });
      entry = { msg: m, readBy: new Set(), el: li };
      st.messages.set(m.messageId, entry);
    }
    for (const r of m.readBy || []) entry.readBy.add(r);
    renderReceipts(entry);
    if (m.userId !== st.user) setTyping(m.userId, false);
    markRead();
  }

  function addReceipt(id, user) {
    const entry = st.messages.get(id);
    if (!entry) return;
    entry.readBy.add(user);
    renderReceipts(entry);
  }

  function renderReceipts(entry) {
    const el = entry.el.querySelector('.receipts');
    el.textContent = entry.readBy.size ? `read by ${[...entry.readBy].join(', ')}` : '';
  }

  // markRead sends a receipt for every message of others the user can see.
  function markRead() {
    if (document.visibilityState !== 'visible') return;
    for (const [id, entry] of st.messages) {
      if (entry.msg.userId === st.user || st.readsSent.has(id) || entry.readBy.has(st.user)) continue;
      if (send({ type: 'message.read', messageId: id })) st.readsSent.add(id);
    }
  }

  function setTyping(user, on) {
    if (user === st.user) return;
    clearTimeout(st.typing.get(user));
    st.typing.delete(user);
    if (on) st.typing.set(user, setTimeout(() => setTyping(user, false), 6000));
    const who = [...st.typing.keys()];
    $('typing').textContent = who.length ? `${who.join(', ')} ${who.length > 1 ? 'are' : 'is'} typing…` : '';
  }

  function clearTypingAll() {
    for (const t of st.typing.values()) clearTimeout(t);
    st.typing.clear();
    $('typing').textContent = '';
  }

  function onInput() {
    const now = Date.now();
    if (now - st.lastTypingSent > 2000) {
      if (send({ type: 'typing.set', typing: true })) st.lastTypingSent = now;
    }
    clearTimeout(st.typingOffTimer);
    st.typingOffTimer = setTimeout(stopTyping, 3000);
  }

  function stopTyping() {
    clearTimeout(st.typingOffTimer);
    if (st.lastTypingSent) send({ type: 'typing.set', typing: false });
    st.lastTypingSent = 0;
  }

  $('join-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const user = $('user').value;
    const room = $('room').value;
    if (!user.trim() || !room.trim()) return;
    if (user !== st.user || room !== st.room) {
      // Another identity or room: a new revision sequence.
      drop();
      st.ws = null;
      st.highest = -1;
      st.messages.clear();
      st.readsSent.clear();
      $('messages').replaceChildren();
      $('members').replaceChildren();
      $('revision').textContent = '–';
    }
    st.user = user;
    st.room = room;
    $('room-name').textContent = room;
    $('lobby').hidden = false;
    const params = new URLSearchParams({ user, room });
    history.replaceState(null, '', `?${params}`);
    st.retries = 0;
    st.userAsked = true;
    startTicking();
    connect();
  });

  $('chat-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('chat-input');
    const text = input.value;
    if (!text.trim()) return;
    const clientMsgId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    if (send({ type: 'chat.send', text, clientMsgId })) {
      input.value = '';
      stopTyping();
    }
  });
  $('chat-input').addEventListener('input', onInput);
  $('drop').addEventListener('click', drop);
  $('lock').addEventListener('click', () => send({ type: 'lock', locked: !st.locked }));
  $('reconnect').addEventListener('click', () => { st.retries = 0; st.userAsked = true; connect(); });
  document.addEventListener('visibilitychange', markRead);

  // For debugging and the browser test: feed a server message to the page
  // as if it came from the socket, and read what the page holds.
  window.lobbyhost = Object.freeze({
    handle: (msg) => handle(msg),
    view: () => ({
      highest: st.highest, ignored: st.ignored, host: st.host, connected: !!st.ws, locked: st.locked,
      conn: st.conn, retryScheduled: st.retryAt > 0 && st.conn === 'reconnecting',
    }),
  });

  // ?user=…&room=… fills the form and joins, for bookmarks and tests.
  const params = new URLSearchParams(location.search);
  if (params.get('user') && params.get('room')) {
    $('user').value = params.get('user');
    $('room').value = params.get('room');
    $('join-form').requestSubmit();
  }
})();
