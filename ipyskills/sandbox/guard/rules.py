"""The guard's rules as data: rule ids, severities, explanations, and the name lists the checks use.

Built from WeKnora's script deny-list, made precise: each entry below is matched on a syntax tree (Python)
or on shell tokens, never as a substring of the raw text. Where this list deliberately differs from that
deny-list, a comment says why. The container is the security boundary; these rules give early, readable
feedback, so a `block` is reserved for code that is destructive or tries to escape, and ordinary network or
subprocess use is only a `warn`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BLOCK = "block"
WARN = "warn"

BLOCK_NOTE = "Blocked before the run; the sandbox would still contain it if you run with the guard off."
WARN_NOTE = "Allowed; the sandbox still applies."


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    why: str  # one sentence: why this matters


_RULES = [
    # --- Python ---
    Rule("py-eval", BLOCK, "evaluating code built at run time can do anything the script can"),
    Rule("py-eval-input", BLOCK, "evaluating text that comes from input, arguments or the environment runs "
         "whatever the caller sends"),
    Rule("py-eval-literal", WARN, "evaluating a fixed string hides code from review; its text was checked too"),
    Rule("py-compile", WARN, "compiling source built at run time prepares code that is not visible here"),
    Rule("py-dynamic-import", WARN, "importing a module whose name is computed at run time hides what is loaded"),
    Rule("py-obfuscated-call", BLOCK, "looking up a dangerous function by a computed name is a common way to "
         "hide the call"),
    Rule("py-shell", BLOCK, "running a command through a shell lets text become commands"),
    Rule("py-subprocess", WARN, "the script starts other programs"),
    Rule("py-pty-spawn", BLOCK, "pty.spawn gives an interactive terminal, the usual step of a reverse shell"),
    Rule("py-unsafe-deserialize", BLOCK, "unpickling or unmarshalling data can run arbitrary code"),
    Rule("py-unsafe-yaml", BLOCK, "YAML loaded with a non-safe loader can construct arbitrary objects"),
    Rule("py-yaml-loader", WARN, "yaml.load with a loader that is not known to be safe"),
    Rule("py-rm-root", BLOCK, "deleting a filesystem root or a system folder"),
    Rule("py-chmod-root", BLOCK, "changing permissions or owner of a filesystem root or a system folder"),
    Rule("py-sensitive-file", BLOCK, "reading account or credential files (passwords, ssh keys, tokens)"),
    Rule("py-fork-bomb", BLOCK, "forking in an endless loop exhausts the process table"),
    Rule("py-ctypes", WARN, "ctypes calls native code directly, outside what can be checked here"),
    Rule("py-network", WARN, "the script uses the network; the sandbox has none unless the run asks for it"),
    Rule("py-syntax-error", WARN, "the file does not parse as Python 3, so only a coarser text scan ran"),
    # --- shell ---
    Rule("sh-rm-root", BLOCK, "recursive delete of a filesystem root, a home folder or a system folder"),
    Rule("sh-rm-unset-var", WARN, "recursive delete of \"$VAR/\": when the variable is empty this is the "
         "root folder (use \"${VAR:?}/\")"),
    Rule("sh-fork-bomb", BLOCK, "a function that calls itself in the background without end (fork bomb)"),
    Rule("sh-reverse-shell", BLOCK, "connects a shell to the network (reverse shell)"),
    Rule("sh-download-exec", BLOCK, "runs code downloaded at run time, which nobody has reviewed"),
    Rule("sh-decode-exec", BLOCK, "decodes hidden text and runs it as code"),
    Rule("sh-eval-input", BLOCK, "evaluates arguments or input as shell code, which runs whatever the caller "
         "sends"),
    Rule("sh-eval", WARN, "evaluates shell code built at run time"),
    Rule("sh-container-escape", BLOCK, "container and namespace tools are used to reach outside a sandbox"),
    Rule("sh-disk-format", BLOCK, "formats or repartitions a disk"),
    Rule("sh-disk-write", BLOCK, "writes raw data to a disk or memory device"),
    Rule("sh-chmod-root", BLOCK, "changes permissions or owner of a filesystem root or a system folder"),
    Rule("sh-sensitive-file", BLOCK, "touches account or credential files (passwords, ssh keys, tokens)"),
    Rule("sh-cron", BLOCK, "installs scheduled jobs, a way to persist beyond the run"),
    Rule("sh-power", BLOCK, "shuts down or reboots the machine"),
    Rule("sh-kernel-module", BLOCK, "loads or unloads kernel modules"),
    Rule("sh-account", BLOCK, "changes user accounts or passwords"),
    Rule("sh-history", WARN, "hides shell history, which only matters when covering tracks"),
    Rule("sh-ld-preload", WARN, "LD_PRELOAD injects a library into every program started afterwards"),
    Rule("sh-privilege", WARN, "asks for root; the sandbox runs as an unprivileged user, so this will fail"),
    Rule("sh-service", WARN, "manages system services, which a sandboxed script cannot do"),
    Rule("sh-network", WARN, "uses the network; the sandbox has none unless the run asks for it"),
    # --- JavaScript ---
    Rule("js-eval", BLOCK, "evaluating code built at run time can do anything the script can"),
    Rule("js-shell", BLOCK, "runs a command through a shell, so text becomes commands"),
    Rule("js-subprocess", WARN, "the script starts other programs"),
    Rule("js-network", WARN, "the script uses the network; the sandbox has none unless the run asks for it"),
    Rule("js-sensitive-file", BLOCK, "reads account or credential files (passwords, ssh keys, tokens)"),
    Rule("js-rm-root", BLOCK, "deletes a filesystem root or a system folder"),
    Rule("js-vm", WARN, "runs code in a vm context built at run time"),
    # --- any language we do not parse, and the file itself ---
    Rule("text-suspicious", WARN, "contains a text pattern typical of destructive or escape attempts; this "
         "language is not parsed, so it is only a hint"),
    Rule("guard-unreadable", WARN, "the file could not be read, so it was not checked"),
    Rule("guard-binary", WARN, "the file looks binary, so it was not checked"),
    Rule("guard-encoding", WARN, "the file is not valid UTF-8; undecodable bytes were replaced before checking"),
    Rule("guard-partial", WARN, "the file is larger than the guard reads, so only its beginning was checked"),
    # --- arguments ---
    Rule("arg-nul", BLOCK, "an argument contains a NUL byte, which no program can receive"),
    Rule("arg-too-long", BLOCK, "an argument is longer than the kernel accepts for one argument "
         "(pass large input on stdin)"),
    Rule("arg-sensitive-file", WARN, "an argument names an account or credential file"),
]

RULES: dict[str, Rule] = {rule.id: rule for rule in _RULES}

# --- file reading -------------------------------------------------------------------------------------------

MAX_BYTES = 1024 * 1024  # the guard reads at most this much of a file
MAX_ARG_BYTES = 131072  # Linux MAX_ARG_STRLEN: exec fails with E2BIG above this for a single argument

EXTENSION_LANGUAGE = {
    ".py": "python", ".pyw": "python",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".ksh": "shell", ".dash": "shell",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "javascript", ".mts": "javascript", ".cts": "javascript", ".tsx": "javascript",
}
SHEBANG_LANGUAGE = {
    "python": "python", "python2": "python", "python3": "python", "pypy": "python", "pypy3": "python",
    "bash": "shell", "sh": "shell", "zsh": "shell", "dash": "shell", "ksh": "shell", "ash": "shell",
    "node": "javascript", "nodejs": "javascript", "deno": "javascript", "bun": "javascript",
}
LANGUAGES = ("python", "shell", "javascript", "other")

# --- paths --------------------------------------------------------------------------------------------------

# Deleting or chmod-ing one of these (after dropping a trailing "/", "/*" or "/.") is a block.
ROOT_PATHS = frozenset({
    "", "/", "~", "$HOME", "${HOME}", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/usr/bin",
    "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log",
})


def normalize_root(path: str) -> str:
    """'/etc/' -> '/etc', '/*' -> '', '~/' -> '~': the folder a recursive operation would start from."""
    p = path.strip()
    changed = True
    while changed and p:
        changed = False
        for tail in ("/*", "/.", "/"):
            if p.endswith(tail):
                p = p[: -len(tail)]
                changed = True
                break
    return p


def is_root_path(path: str) -> bool:
    return bool(path.strip()) and normalize_root(path) in ROOT_PATHS


# Account and credential files. WeKnora matched ".ssh/" and "passwd" anywhere in the text, so a comment or
# `passwd_field = ...` was a finding; here these only count as a path a command or call actually uses.
SENSITIVE_PATH = re.compile(
    r"(^|[/~])("
    r"etc/(shadow|gshadow|passwd|sudoers)(\b|$)|etc/sudoers\.d"
    r"|\.ssh/(id_[a-z0-9_]+|authorized_keys|identity)"
    r"|\.aws/credentials|\.kube/config|\.docker/config\.json|\.netrc$|\.git-credentials|\.pgpass"
    r"|\.gnupg/"
    r")"
    r"|(^|/)id_(rsa|dsa|ecdsa|ed25519)(\.pub)?$"
)


def is_sensitive_path(text: str) -> bool:
    return bool(SENSITIVE_PATH.search(text.strip()))


# --- Python -------------------------------------------------------------------------------------------------

# Builtins that only matter as calls of the builtin itself (`model.eval()` is a method, not this).
PY_EVAL_BUILTINS = frozenset({"builtins.eval", "builtins.exec"})
PY_SHELL_CALLS = frozenset({
    "os.system", "os.popen", "os.popen2", "os.popen3", "os.popen4", "platform.popen",
    "commands.getoutput", "commands.getstatusoutput", "subprocess.getoutput", "subprocess.getstatusoutput",
    "asyncio.create_subprocess_shell",
})
PY_SUBPROCESS_CALLS = frozenset({
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "subprocess.Popen", "asyncio.create_subprocess_exec", "os.posix_spawn", "os.posix_spawnp",
    "os.startfile",
})
PY_SUBPROCESS_PREFIXES = ("os.exec", "os.spawn")  # os.execv, os.execlp, os.spawnl, ...
PY_UNSAFE_DESERIALIZE = frozenset({
    "pickle.load", "pickle.loads", "pickle.Unpickler", "cPickle.load", "cPickle.loads", "cPickle.Unpickler",
    "_pickle.load", "_pickle.loads", "_pickle.Unpickler", "marshal.load", "marshal.loads",
    "dill.load", "dill.loads", "cloudpickle.load", "cloudpickle.loads", "pandas.read_pickle",
})
# yaml.load without any Loader is not a finding: PyYAML 6 refuses that call (TypeError), and WeKnora's
# `yaml.load(f)` hit was a false positive. A named loader decides.
PY_YAML_LOAD = frozenset({"yaml.load", "yaml.load_all"})
PY_YAML_UNSAFE_CALLS = frozenset({"yaml.unsafe_load", "yaml.unsafe_load_all"})
PY_YAML_SAFE_LOADERS = frozenset({"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"})
PY_YAML_UNSAFE_LOADERS = frozenset({"Loader", "CLoader", "UnsafeLoader", "CUnsafeLoader"})
PY_DELETE_CALLS = frozenset({
    "shutil.rmtree", "os.rmdir", "os.removedirs", "os.remove", "os.unlink", "send2trash.send2trash",
})
PY_CHMOD_CALLS = frozenset({"os.chmod", "os.chown", "os.lchown", "shutil.chown"})
# Calls whose path argument is what gets opened or copied; a sensitive path there is a read of secrets.
PY_PATH_CALLS = frozenset({
    "builtins.open", "io.open", "os.open", "codecs.open", "pathlib.Path", "pathlib.PurePath",
    "pathlib.PosixPath", "os.path.expanduser", "os.path.join", "shutil.copy", "shutil.copy2",
    "shutil.copyfile", "shutil.copytree", "os.stat", "os.listdir", "os.scandir", "glob.glob",
})
PY_INPUT_SOURCES = frozenset({
    "builtins.input", "builtins.raw_input", "sys.stdin", "sys.argv", "os.environ", "os.getenv",
    "os.environb", "fileinput.input", "sys.stdin.read", "sys.stdin.readline", "sys.stdin.readlines",
})
PY_DYNAMIC_IMPORTS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
PY_NETWORK_PREFIXES = (
    "requests.", "httpx.", "aiohttp.", "urllib.request.", "urllib2.", "urllib3.", "http.client.",
    "http.server.", "httplib.", "ftplib.", "smtplib.", "poplib.", "imaplib.", "telnetlib.", "paramiko.",
    "websocket.", "websockets.", "pycurl.", "socketserver.", "xmlrpc.client.", "urllib.urlopen",
    "asyncio.open_connection", "asyncio.start_server",
    "socket.socket", "socket.create_connection", "socket.create_server", "socket.fromfd",
)
PY_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash"})

# --- shell --------------------------------------------------------------------------------------------------

SHELLS = PY_SHELLS
INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "php", "pypy", "pypy3"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-download", "lwp-request"})
NETWORK_COMMANDS = frozenset({
    "curl", "wget", "nc", "ncat", "netcat", "telnet", "ssh", "scp", "sftp", "ftp", "socat", "aria2c",
    "lwp-download", "lwp-request",
})
# These reach the network only with certain subcommands (`git clone`, `pip install`, ...).
NETWORK_SUBCOMMANDS = {
    "git": frozenset({"clone", "fetch", "pull", "push", "ls-remote", "submodule"}),
    "pip": frozenset({"install", "download"}), "pip3": frozenset({"install", "download"}),
    "npm": frozenset({"install", "i", "ci", "add"}), "pnpm": frozenset({"install", "i", "add"}),
    "yarn": frozenset({"install", "add"}), "apt": frozenset({"install", "update"}),
    "apt-get": frozenset({"install", "update"}), "gem": frozenset({"install"}),
    "cargo": frozenset({"install"}), "go": frozenset({"get", "install"}),
}
REVERSE_SHELL_TOOLS = frozenset({"nc", "ncat", "netcat", "telnet", "socat"})
CONTAINER_TOOLS = frozenset({
    "docker", "podman", "kubectl", "nsenter", "unshare", "capsh", "chroot", "runc", "crictl", "ctr",
    "lxc", "lxc-attach",
})
DISK_FORMAT_COMMANDS = frozenset({"mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "parted", "gdisk"})
POWER_COMMANDS = frozenset({"shutdown", "reboot", "halt", "poweroff", "telinit"})
KERNEL_MODULE_COMMANDS = frozenset({"insmod", "modprobe", "rmmod"})
ACCOUNT_COMMANDS = frozenset({
    "passwd", "chpasswd", "useradd", "usermod", "userdel", "adduser", "deluser", "visudo", "groupadd",
})
PRIVILEGE_COMMANDS = frozenset({"sudo", "su", "doas"})
SERVICE_COMMANDS = frozenset({"systemctl", "service"})
# Words that may stand before the real command name (`sudo rm ...`, `env X=1 rm ...`, `then rm ...`).
COMMAND_PREFIXES = frozenset({
    "sudo", "doas", "exec", "command", "builtin", "nohup", "time", "nice", "ionice", "stdbuf", "timeout",
    "env", "setsid", "xargs", "then", "do", "else", "elif", "if", "while", "until", "!", "{", "}",
})
# Prefix options that take a value (`timeout -s KILL 5 cmd`, `xargs -I {} cmd`, `sudo -u user cmd`).
PREFIX_VALUE_OPTIONS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}, "doas": {"-u", "-C"},
    "nice": {"-n"}, "ionice": {"-c", "-n", "-p"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-s", "-a", "-E", "--max-args", "--max-procs", "--delimiter"},
    "stdbuf": set(),
}
SAFE_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty",
                          "/dev/random", "/dev/urandom", "/dev/full"})
RAW_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|dm-|md|loop|mapper/|disk/|mem$|kmem$|port$)")
CRON_PATH = re.compile(r"^/(etc/cron|etc/anacrontab|var/spool/cron)")
HISTORY_VARS = frozenset({"HISTFILE", "HISTSIZE", "HISTFILESIZE"})

# --- languages we do not parse ------------------------------------------------------------------------------

# Only high-signal markers, as warnings: without a parser a word in a string cannot be told from code.
TEXT_MARKERS = [
    (re.compile(r"/dev/(tcp|udp)/"), "a /dev/tcp or /dev/udp socket path"),
    (re.compile(r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(--no-preserve-root\s+)?/(\*)?(\s|$|['\"])"),
     "a recursive delete of /"),
    (re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&"), "a fork bomb"),
    (re.compile(r"/etc/shadow|\.ssh/id_[a-z0-9]+"), "a credential file path"),
    (re.compile(r"\b(curl|wget)\b[^\n|]*\|\s*(ba|z|da|k)?sh\b"), "a download piped into a shell"),
]
