"""``acp-replay --client --workspace DIR``: the recorded client's file writes, performed
under DIR, so the agent's own tools (a shell's ``cat``) see the files the recording's
client wrote.

A recording is input from anywhere, so a write goes nowhere but under DIR: the path must
be absolute and under DIR (the session's working directory is mapped onto DIR before
the agent is asked anything), no component may be ``..`` or ``.``, and every component is
opened relative to the one before it with ``O_NOFOLLOW``: a symbolic link anywhere on
the way (one the agent made, one already there) refuses the write instead of leading out
of DIR. Only a regular file is written (a FIFO or a device is refused, never opened for
long). Without ``--workspace`` nothing is written at all.
"""

from __future__ import annotations

import errno
import os
import stat

from acp_pipes.errors import UsageError

__all__ = ["Workspace"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Workspace:
    """DIR, opened once; :meth:`write` writes under it or says why it did not."""

    def __init__(self, root: str):
        try:
            os.makedirs(root, exist_ok=True)
            self.root = os.path.realpath(root)
            self.fd = os.open(self.root, _DIR_FLAGS)
        except OSError as e:
            raise UsageError(f"--workspace {root}: {e.strerror or e}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def parts(self, path: str) -> list[str] | str:
        """The components of ``path`` under DIR, or why it is not under it."""
        if not isinstance(path, str) or not path.startswith("/"):
            return "not an absolute path"
        if "\0" in path:
            return "a NUL in the path"
        root = self.root.rstrip("/") + "/"
        if path.rstrip("/") == self.root.rstrip("/"):
            return "the workspace itself"
        if not path.startswith(root):
            return f"outside the workspace {self.root}"
        parts = [p for p in path[len(root):].split("/") if p != ""]
        if not parts:
            return "the workspace itself"
        if any(p in (".", "..") for p in parts):
            return "a '.' or '..' in the path"
        return parts

    def write(self, path: str, content: str) -> str | None:
        """Write ``content`` (UTF-8) to ``path``, creating the directories on the way;
        None when written, else why not."""
        parts = self.parts(path)
        if isinstance(parts, str):
            return parts
        if not isinstance(content, str):
            return "the content is not text"
        fds: list[int] = []
        try:
            at = self.fd
            for name in parts[:-1]:
                try:
                    at = os.open(name, _DIR_FLAGS, dir_fd=at)
                except FileNotFoundError:
                    os.mkdir(name, 0o755, dir_fd=at)
                    at = os.open(name, _DIR_FLAGS, dir_fd=at)
                fds.append(at)
            fd = os.open(parts[-1], _FILE_FLAGS, 0o644, dir_fd=at)
            fds.append(fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "not a regular file"
            os.set_blocking(fd, True)
            os.ftruncate(fd, 0)
            data = content.encode("utf-8", "surrogatepass")
            while data:
                n = os.write(fd, data)
                data = data[n:]
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                return "a symbolic link (or a file) on the way"
            return e.strerror or str(e)
        finally:
            for fd in fds:
                os.close(fd)
