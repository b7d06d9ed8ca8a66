"""Host-side tar archives for ``upload`` and ``download``: pack a local file or tree for ``UNTAR``, unpack what
``TAR_OUT`` sent without letting any member land outside the destination."""

from __future__ import annotations

import errno
import io
import os
import posixpath
import tarfile
from pathlib import Path, PurePosixPath


def tar_for_upload(source: Path, target: str) -> tuple[str, bytes]:
    """Where to extract, and a tar that puts ``source`` at the container path ``target`` there: for a
    directory, its children (extracted into ``target``); for a file, one member named after ``target``
    (extracted into its directory). Ownership is reset: files belong to whoever extracts them."""
    if not source.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(source))

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directory = target
        if source.is_dir():
            for child in sorted(source.iterdir()):
                tar.add(child, arcname=child.name, filter=reset)
        else:
            directory = posixpath.dirname(target) or "/"
            tar.add(source, arcname=posixpath.basename(target), filter=reset)
    return directory, buffer.getvalue()


def extract_download(data: bytes, top: str, dest: Path) -> None:
    """Unpack the tar ``TAR_OUT`` made of ``top`` so that ``top`` itself becomes ``dest``. Members that
    would land outside ``dest`` (absolute, ``..``, through a symlink) are refused."""
    dest = Path(dest)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        if not members:
            raise OSError(errno.EIO, "empty archive from the container", top)
        root = members[0]
        if root.name.rstrip("/") == top and not root.isdir():
            dest.parent.mkdir(parents=True, exist_ok=True)
            _extract_file(tar, root, dest)
            return
        dest.mkdir(parents=True, exist_ok=True)
        real_root = os.path.realpath(dest)
        for member in members:
            parts = PurePosixPath(member.name).parts
            if not parts or parts[0] != top or len(parts) == 1:
                continue
            rel = parts[1:]
            if any(p in ("..", "") or p.startswith("/") for p in rel):
                raise OSError(errno.EPERM, f"unsafe path in archive: {member.name}", str(dest))
            target = dest.joinpath(*rel)
            parent = os.path.realpath(target.parent)
            if parent != real_root and not parent.startswith(real_root + os.sep):
                raise OSError(errno.EPERM, f"archive member leads outside: {member.name}", str(dest))
            if member.isdir():
                if target.is_symlink():
                    target.unlink()
                target.mkdir(parents=True, exist_ok=True)
            elif member.issym():
                if target.is_symlink() or target.exists():
                    target.unlink()
                os.symlink(member.linkname, target)
            elif member.isfile() or member.islnk():
                _extract_file(tar, member, target)


def _extract_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        return
    if target.is_symlink():
        target.unlink()
    with source, open(target, "wb") as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)
    os.chmod(target, (member.mode & 0o777) | 0o600)
