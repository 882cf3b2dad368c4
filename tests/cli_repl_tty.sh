#!/usr/bin/env bash
# cli_repl_tty.sh -- the prompt on a real terminal (a pseudo-terminal driven from Python):
# `attnlab> ` prompt, tab completion from the table, Ctrl-C at the idle prompt clears the line,
# Ctrl-C stops running Lua code and the session goes on, a caret under the bad word, `quit`, and
# history kept across sessions in $ATTNLAB_HOME/history. Skips (77) without python3.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tty shared-cache
cd "$T" || exit 1
command -v python3 >/dev/null || { echo "SKIP: no python3 for the pty driver"; exit 77; }
export ATTNLAB_HOME="$T/home"
python3 - "$ATTNLAB" <<'PY'
import os, pty, select, signal, sys, time

binary = sys.argv[1]
fails = []
signal.alarm(120)          # never hang the test suite

def spawn():
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execv(binary, [binary])
    return pid, fd

pending = {}

def read_until(fd, needle, timeout=10.0, quiet=False):
    """Output up to and including needle; what follows stays for the next call."""
    buf, end = pending.get(fd, b""), time.time() + timeout
    while needle.encode() not in buf and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    k = buf.find(needle.encode())
    if k < 0:
        pending[fd] = b""
        if not quiet:
            fails.append("timed out waiting for %r; got %r" % (needle, buf.decode(errors="replace")[-300:]))
        return buf.decode(errors="replace")
    pending[fd] = buf[k + len(needle):]
    return buf[:k + len(needle)].decode(errors="replace")

def wait_exit(pid, timeout=20.0):
    """The exit status, or None (and the process killed) when it does not end in time."""
    end = time.time() + timeout
    while time.time() < end:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return status
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    fails.append("process did not exit")
    return None

def check(cond, what):
    if not cond:
        fails.append(what)

pid, fd = spawn()
banner = read_until(fd, "attnlab> ")
check("attnlab 0." in banner and "help" in banner, "no one-line banner with the version and help: %r" % banner)
# tab completion of a command name, then run it
os.write(fd, b"ech\t")
out = read_until(fd, "echo ")
os.write(fd, b"hi there\r")
out = read_until(fd, "hi there\r\n")
out = read_until(fd, "attnlab> ")
# completion of a setting name
os.write(fd, b"set plot.f\t")
read_until(fd, "plot.format ")
os.write(fd, b"\r")
read_until(fd, "png")
read_until(fd, "attnlab> ")
# Ctrl-C at the idle prompt clears the line; the session stays
os.write(fd, b"xyz")
read_until(fd, "xyz")
os.write(fd, b"\x03")
read_until(fd, "attnlab> ")
os.write(fd, b"echo ok\r")
out = read_until(fd, "attnlab> ")
check("xyzecho" not in out and "ok\r\n" in out, "Ctrl-C at the prompt did not clear the line: %r" % out)
# Ctrl-C stops a running Lua loop
os.write(fd, b"lua while true do end\r")
read_until(fd, "while true do end\r\n")    # the line was taken: the loop starts
out = ""
for attempt in range(5):
    time.sleep(0.3)
    os.write(fd, b"\x03")
    out += read_until(fd, "attnlab> ", timeout=3.0, quiet=True)
    if "interrupted" in out:
        break
check("interrupted" in out, "Lua loop not interrupted: %r" % out)
os.write(fd, b"echo still\r")
out = read_until(fd, "attnlab> ")
check("still" in out, "session did not go on: %r" % out)
# a caret under the bad word, offset by the prompt
os.write(fd, b"set tau 0.5 lyer\r")
out = read_until(fd, "attnlab> ")
check("\r" + " " * 21 + "^--- unexpected argument 'lyer'" in out, "caret: %r" % out)
# an unfinished Lua chunk gets a continuation prompt
os.write(fd, b"lua function sq(x)\r")
read_until(fd, "...> ")
os.write(fd, b"return x * x end\r")
read_until(fd, "attnlab> ")
os.write(fd, b"= sq(12)\r")
out = read_until(fd, "attnlab> ")
check("144" in out, "continued Lua: %r" % out)
os.write(fd, b"quit\r")
status = wait_exit(pid)
check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "quit status %r" % status)
os.close(fd)

# history across sessions: the file has the lines; Up in a new session recalls the last one
hist = open(os.path.join(os.environ["ATTNLAB_HOME"], "history")).read()
check("echo hi there\n" in hist and "set tau 0.5 lyer\n" in hist and hist.endswith("quit\n"), "history file: %r" % hist)
pid, fd = spawn()
read_until(fd, "attnlab> ")
os.write(fd, b"\x1b[A\x1b[A")
out = read_until(fd, "= sq(12)")
os.write(fd, b"\x03")
read_until(fd, "attnlab> ")
os.write(fd, b"\x04")     # Ctrl-D ends the session
status = wait_exit(pid)
check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "Ctrl-D status %r" % status)

for f in fails:
    print("FAIL:", f)
print("%d failed" % len(fails))
sys.exit(1 if fails else 0)
PY
