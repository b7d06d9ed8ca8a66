"""The egress proxy of an ``allowlist`` network policy: an HTTP proxy (``CONNECT`` for HTTPS, absolute URLs for
HTTP) that reaches only the allowed hosts. Standard library only: its source runs as ``python3 -c`` in the proxy
container (``python3 - ALLOWED_JSON PORT``), and :func:`allowed` is imported by the tests.

An entry allows a host when it is the same name (any case, without a trailing dot), a ``*.`` wildcard the name is
a subdomain of, the same IP address, or a CIDR range holding the address. A name allowed by name may connect to
any address it resolves to; a name not allowed by name may connect only to its addresses that an IP or CIDR entry
allows. Anything else gets ``403 Forbidden``, naming the host.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import sys

DENIED = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"


def _name(host: str) -> str:
    return host.strip().lower().rstrip(".").strip("[]")


def name_allowed(host: str, entries: list[str]) -> bool:
    """Whether ``host`` (a name or an address) is allowed by a name, wildcard, address or range entry."""
    host = _name(host)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in entries:
        entry = _name(entry)
        if address is not None:
            if "/" in entry:
                try:
                    if address in ipaddress.ip_network(entry, strict=False):
                        return True
                except ValueError:
                    continue
            elif entry == host or _same_address(entry, address):
                return True
        elif entry.startswith("*."):
            if host.endswith(entry[1:]) and host != entry[2:]:
                return True
        elif entry == host:
            return True
    return False


def _same_address(entry: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(entry) == address
    except ValueError:
        return False


def allowed(host: str, entries: list[str], addresses: list[str] | None = None) -> list[str] | None:
    """The addresses the proxy may connect to for ``host`` (``addresses``: what it resolves to), or ``None``
    when it is not allowed. ``[]`` means: connect by name."""
    if name_allowed(host, entries):
        return []
    permitted = [a for a in addresses or [] if name_allowed(a, entries)]
    return permitted or None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass


async def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, entries: list[str]) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        writer.close()
        return
    if method.upper() == "CONNECT":
        host, _, port_text = target.rpartition(":")
        path = None
    else:
        if not target.lower().startswith("http://"):
            writer.write(DENIED.encode() + b"agentcompass egress proxy: only proxy requests (absolute URLs)\n")
            writer.close()
            return
        rest = target[7:]
        authority, slash, tail = rest.partition("/")
        path = slash + tail or "/"
        host, _, port_text = authority.rpartition(":") if authority.rpartition(":")[2].isdigit() else (
            authority, "", "80")
    host = host.strip("[]")
    port = int(port_text) if port_text.isdigit() else (443 if path is None else 80)
    addresses = await _resolve(host, port)
    permitted = allowed(host, entries, addresses)
    if permitted is None:
        writer.write(DENIED.encode() + f"agentcompass egress proxy: {host} is not in the allowlist\n".encode())
        await writer.drain()
        writer.close()
        return
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection(permitted[0] if permitted else host, port)
    except OSError as exc:
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n" + f"{host}: {exc}\n".encode())
        writer.close()
        return
    if path is None:
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
    else:
        headers = [line for line in lines[1:] if line and not line.lower().startswith("proxy-")]
        upstream_writer.write(f"{method} {path} {version}\r\n".encode("latin-1")
                              + "".join(f"{h}\r\n" for h in headers).encode("latin-1") + b"\r\n")
        await upstream_writer.drain()
    await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


async def serve(entries: list[str], port: int) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, entries), "0.0.0.0", port)
    print(f"egress proxy listening on {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(json.loads(sys.argv[1]), int(sys.argv[2])))
