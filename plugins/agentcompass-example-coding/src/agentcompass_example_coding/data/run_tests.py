"""The example_coding verifier: runs a task's hidden tests against a submitted ``solution.py``.

It is copied into the evaluation environment and run there with the environment's ``python3``, so it uses the
standard library only and stays compatible with old Pythons (3.8+).

Parent mode (what ``evaluate`` runs)::

    python3 run_tests.py --tests hidden_tests.py --submission artifacts/solution.py --timeout 10

prints exactly one JSON line ``{"submitted": bool, "passed": int, "total": int, "tests": [...]}`` and exits 0
whenever it could judge the submission, however badly the submission behaved. Any other outcome (non-zero
exit, no JSON line) means the verifier itself failed.

The parent never runs submission code. Each test runs in its own child process (``-c SOURCE --one NAME``),
in a scratch directory, in its own process group that is killed when the per-test timeout expires, with its
output going to files (so a grandchild holding a pipe cannot hang the verifier). A child proves that its test
passed by printing a random token it read on stdin before the submission was imported, so a submission that
calls ``os._exit(0)`` does not pass. The hidden tests travel on stdin too and the child's code on its command
line, so a submission that rewrites files cannot change them. This guards against accidents and lazy tricks;
it is not a sandbox against a determined adversary.
"""

import os
import sys

# Only os and sys at the top: every test starts a child from this file, so its start-up time counts. The
# parent's modules are imported in parent().

MEMORY_LIMIT_BYTES = 1 << 30
IMPORT_ONLY = "-"  # the child only imports the submission: a preflight, so a broken import costs one timeout
ERROR_CHARS = 400
_OWN_SOURCE = ""  # this file's text, read by the parent before any submission runs


def _load_test_names(source, filename):
    namespace = {"__name__": "hidden_tests"}
    exec(compile(source, filename, "exec"), namespace)
    names = [name for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    if not names:
        raise SystemExit(f"verifier: no test_* function in {filename}")
    return names


def _kill_group(proc):
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path):
    with open(path, "rb") as f:
        data = f.read().decode("utf-8", "replace").strip()
    lines = [line for line in data.splitlines() if line.strip()]
    return (lines[-1] if lines else "")[-ERROR_CHARS:]


def _run_one_in_child(name, source, submission, timeout, scratch):
    import secrets
    import subprocess
    import threading

    out_path = os.path.join(scratch, "stdout")
    err_path = os.path.join(scratch, "stderr")
    cwd = os.path.join(scratch, "cwd")
    os.mkdir(cwd)
    token = secrets.token_hex(16)
    # -I -S: no user or site packages, no PYTHON* variables (the tasks ask for the standard library only).
    # The child runs this verifier's source as read at start-up (-c), so a submission that rewrites
    # run_tests.py on disk changes nothing.
    argv = [sys.executable, "-I", "-S", "-B", "-c", _OWN_SOURCE, "--one", name, submission]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=cwd, start_new_session=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write((token + "\n" + source).encode("utf-8"))
            proc.stdin.close()
        except BrokenPipeError:
            pass
        # A timer kills the group on expiry; a blocking wait returns the moment the child exits (waiting
        # with a timeout would poll).
        expired = threading.Event()

        def expire():
            expired.set()
            _kill_group(proc)

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            returncode = proc.wait()
        finally:
            timer.cancel()
        _kill_group(proc)  # also kills grandchildren the submission left behind
        timed_out = expired.is_set()
    with open(out_path, "rb") as f:
        stdout_lines = f.read().decode("utf-8", "replace").splitlines()
    if timed_out:
        return False, f"timed out after {timeout:g}s"
    if returncode == 0 and stdout_lines and stdout_lines[-1].strip() == token:
        return True, None
    error = _tail(err_path) or f"exited with status {returncode} without passing"
    return False, error


def _run_isolated(name, source, submission, timeout):
    import shutil
    import tempfile

    try:
        scratch = tempfile.mkdtemp(prefix="example-coding-")
    except OSError:  # no writable temp directory (a read-only container): use the working directory
        scratch = tempfile.mkdtemp(prefix=".example-coding-", dir=os.getcwd())
    try:
        return _run_one_in_child(name, source, submission, timeout, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def parent(args):
    import json

    global _OWN_SOURCE
    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        _OWN_SOURCE = f.read()
    with open(args.tests, encoding="utf-8") as f:
        source = f.read()
    names = _load_test_names(source, args.tests)
    submission = os.path.abspath(args.submission)
    submitted = os.path.isfile(submission)
    tests = []
    import_error: str | None = "no submission"
    if submitted:
        passed, error = _run_isolated(IMPORT_ONLY, source, submission, args.timeout)
        import_error = None if passed else f"importing the submission failed: {error}"
    for name in names:
        if import_error is not None:
            tests.append({"name": name, "passed": False, "error": import_error})
            continue
        passed, error = _run_isolated(name, source, submission, args.timeout)
        tests.append({"name": name, "passed": passed, "error": error})
    report = {
        "submitted": submitted,
        "passed": sum(1 for t in tests if t["passed"]),
        "total": len(tests),
        "tests": tests,
    }
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


def child(name, submission):
    """``run_tests.py --one NAME SUBMISSION``: import the submission, run one test (none for IMPORT_ONLY),
    print the token from stdin if and only if that worked."""
    token = sys.stdin.readline().strip()
    source = sys.stdin.read()
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    import importlib.util
    import traceback

    real_stdout = os.dup(1)
    os.dup2(2, 1)  # whatever the submission prints goes to stderr, never next to the token
    try:
        namespace: dict = {"__name__": "hidden_tests"}
        exec(compile(source, "hidden_tests.py", "exec"), namespace)
        spec = importlib.util.spec_from_file_location("solution", submission)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {submission}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
        if name != IMPORT_ONLY:
            namespace[name](module)
    except BaseException:  # SystemExit and friends included: any way out but returning fails the test
        sys.stdout.flush()
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    os.write(real_stdout, (token + "\n").encode("utf-8"))
    os._exit(0)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        child(sys.argv[2], sys.argv[3])
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", default="hidden_tests.py")
    parser.add_argument("--submission", default="artifacts/solution.py")
    parser.add_argument("--timeout", type=float, default=10.0)
    return parent(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
