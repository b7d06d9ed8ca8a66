"""``agentcompass ctl``: steering a live run from another process.

A run the CLI starts (:attr:`agentcompass.runner.Runner.control`) holds two files in its run directory while it
runs, both removed when it ends:

* ``control.lock`` — an advisory ``flock`` held by the running process, holding its pid and uid: who owns the run
  (:mod:`agentcompass.control.endpoint`). The kernel drops it when the process dies, however it dies, so a
  ``control.sock`` left by a killed run is known to be stale and is replaced by the next run (or resume).
* ``control.sock`` — a unix socket, owner-only (mode 0600), the process serves on
  (:mod:`agentcompass.control.server`); a peer of another uid (``SO_PEERCRED``) is refused. When the run
  directory's path is too long for a socket address, ``control.sock`` is a symbolic link to a socket in a private
  directory under the system's temporary directory.

The protocol is one JSON object a line each way: a request ``{"action": "pause", ...}`` and its reply ``{"ok":
true, "message": ..., "status": {...}}`` or ``{"ok": false, "error": ...}``. What each action does is
:mod:`agentcompass.control.steering`; the client is :mod:`agentcompass.control.client`.
"""
