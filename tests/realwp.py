"""A real WordPress for the ``wordpress`` test tier: Debian's package, ``php -S``, MariaDB, all on 127.0.0.1.

``WordPressSite`` brings one up in a temporary folder and tears it down by
PID. It never writes to /etc or to /usr/share/wordpress: instead of Debian's
``wp-config.php`` (which reads /etc/wordpress/config-<host>.php), a
bootstrap in the temporary folder defines the constants and loads
``wp-settings.php`` itself, for the ``php -S`` router and for the PHP CLI
commands (install, users, application passwords, permalinks, counting posts)
alike. The database is a per-session database and user on the MariaDB at
``PIPELINE_TEST_MYSQL`` (default 127.0.0.1:3306, user root, no password),
dropped at teardown; when nothing answers there and that variable is unset,
a MariaDB of its own (Debian's ``mariadb-server``) is started in the
temporary folder on a free port and stopped by PID at teardown.

Knobs the tests use to make WordPress fail the way it does in production:

* ``permalinks(mode)``: "plain" (``?p=123``, a fresh install's default),
  "date" (``/%year%/%monthnum%/%day%/%postname%/``) or "postname";
* ``database_down()``: WordPress gets a closed port for its database, as
  when MariaDB is stopped (it answers "Error establishing a database
  connection" with status 500);
* ``stop_php()`` / ``start_php()``: the web server itself goes away.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

WP_ROOT = Path(os.environ.get("PIPELINE_TEST_WP_ROOT", "/usr/share/wordpress"))
# Debian 12: wordpress, php-cli, php-mysql, php-curl, php-xml, php-mbstring; a theme renders public pages.
DEBIAN_PACKAGES = ["wordpress", "wordpress-theme-twentytwentythree", "php-cli", "php-mysql", "php-curl",
                   "php-xml", "php-mbstring"]
PERMALINKS = {"plain": "", "date": "/%year%/%monthnum%/%day%/%postname%/", "postname": "/%postname%/"}
USERS = {"admin": "administrator", "writer": "author", "contrib": "contributor"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mysql_target() -> tuple[str, int, str, str]:
    """(host, port, user, password) of the MariaDB the tier may create a database on."""
    spec = os.environ.get("PIPELINE_TEST_MYSQL", "root@127.0.0.1:3306")
    cred, _, hostport = spec.rpartition("@")
    user, _, password = (cred or "root").partition(":")
    host, _, port = hostport.partition(":")
    return host or "127.0.0.1", int(port or 3306), user, password


def missing() -> str | None:
    """Why a real WordPress cannot be brought up here, or None when it can."""
    if not (WP_ROOT / "wp-settings.php").is_file():
        return f"no WordPress at {WP_ROOT} (Debian package 'wordpress')"
    if not (WP_ROOT / "wp-content" / "themes" / "twentytwentythree").is_dir():
        return "no theme to render public pages (Debian package 'wordpress-theme-twentytwentythree')"
    php = shutil.which("php")
    if php is None:
        return "no php (Debian package 'php-cli')"
    modules = subprocess.run([php, "-m"], capture_output=True, text=True).stdout.lower().split()
    for module, package in (("mysqli", "php-mysql"), ("mbstring", "php-mbstring"), ("dom", "php-xml"),
                            ("curl", "php-curl")):
        if module not in modules:
            return f"php lacks {module} (Debian package '{package}')"
    if shutil.which("mysql") is None and shutil.which("mariadb") is None:
        return "no mysql client (Debian package 'mariadb-client')"
    host, port, _, _ = mysql_target()
    if not _reachable(host, port) and not own_mariadb_possible():
        return (f"no MariaDB/MySQL on {host}:{port} (set PIPELINE_TEST_MYSQL=user:password@host:port) "
                "and no mariadbd to start one (Debian package 'mariadb-server')")
    return None


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def own_mariadb_possible() -> bool:
    return ("PIPELINE_TEST_MYSQL" not in os.environ and shutil.which("mariadb-install-db") is not None
            and (shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists()))


class OwnMariaDB:
    """A throwaway MariaDB in ``workdir`` on a free port (root, no password), for machines without one running."""

    def __init__(self, workdir: Path) -> None:
        self.dir = Path(workdir)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> tuple[str, int, str, str]:
        data = self.dir / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses root unless told
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", *user,
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True, timeout=120)
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        log = open(self.dir / "mariadbd.log", "ab")  # noqa: SIM115  (the server's stdout, open while it runs)
        self.proc = subprocess.Popen([mariadbd, "--no-defaults", f"--datadir={data}", f"--socket={self.dir}/mysqld.sock",
                                      f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-log-bin",
                                      f"--pid-file={self.dir}/mariadbd.pid", *user], stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not _reachable("127.0.0.1", self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not start: {(self.dir / 'mariadbd.log').read_text(errors='replace')[-500:]}")
            time.sleep(0.1)
        return "127.0.0.1", self.port, "root", ""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # SIGTERM: a clean shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None


BOOTSTRAP = r"""<?php
// Instead of Debian's wp-config.php: everything it would define, read from site.json next to this file.
$pipeline_site = json_decode(file_get_contents(__DIR__ . '/site.json'), true);
define('DB_NAME', $pipeline_site['db_name']);
define('DB_USER', $pipeline_site['db_user']);
define('DB_PASSWORD', $pipeline_site['db_password']);
// database_down(): a port nobody listens on, as when MariaDB is stopped.
define('DB_HOST', file_exists(__DIR__ . '/db-down') ? '127.0.0.1:' . $pipeline_site['dead_port'] : $pipeline_site['db_host']);
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
define('WP_HOME', $pipeline_site['url']);
define('WP_SITEURL', $pipeline_site['url']);
define('WP_ENVIRONMENT_TYPE', 'local');   // application passwords over plain http
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);    // WordPress itself never leaves 127.0.0.1
define('WP_DEBUG', false);
define('WP_CONTENT_DIR', $pipeline_site['root'] . '/wp-content');
foreach (['AUTH_KEY', 'SECURE_AUTH_KEY', 'LOGGED_IN_KEY', 'NONCE_KEY', 'AUTH_SALT', 'SECURE_AUTH_SALT',
          'LOGGED_IN_SALT', 'NONCE_SALT'] as $i => $name) {
    define($name, $pipeline_site['salt'] . $i);
}
$table_prefix = 'wp_';
define('ABSPATH', $pipeline_site['root'] . '/');
"""

ROUTER = r"""<?php
// php -S router: real static files as they are, everything else through WordPress (as Apache's rewrite does).
$path = urldecode(parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH));
if ($path !== '/' && substr($path, -4) !== '.php' && is_file($_SERVER['DOCUMENT_ROOT'] . $path)) {
    return false;
}
$_SERVER['SCRIPT_NAME'] = $_SERVER['PHP_SELF'] = '/index.php';
$_SERVER['SCRIPT_FILENAME'] = $_SERVER['DOCUMENT_ROOT'] . '/index.php';
define('WP_USE_THEMES', true);
require __DIR__ . '/bootstrap.php';
require_once ABSPATH . 'wp-settings.php';
wp();
require_once ABSPATH . WPINC . '/template-loader.php';
"""

CLI = r"""<?php
// php cli.php <command> [args]: the site's administration from PHP CLI; prints JSON.
$pipeline_site = json_decode(file_get_contents(__DIR__ . '/site.json'), true);
$_SERVER['HTTP_HOST'] = parse_url($pipeline_site['url'], PHP_URL_HOST) . ':' . parse_url($pipeline_site['url'], PHP_URL_PORT);
$_SERVER['REQUEST_URI'] = '/';
$command = $argv[1];
if ($command === 'install') define('WP_INSTALLING', true);
require __DIR__ . '/bootstrap.php';
require_once ABSPATH . 'wp-settings.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
require_once ABSPATH . 'wp-admin/includes/user.php';
$out = [];
switch ($command) {
case 'install':
    if (!is_blog_installed()) {
        wp_install('pipeline test site', 'admin', 'admin@example.invalid', true, '', wp_generate_password(24));
    }
    switch_theme('twentytwentythree');
    foreach (json_decode($argv[2], true) as $login => $role) {
        $id = username_exists($login) ?: wp_insert_user(['user_login' => $login, 'user_pass' => wp_generate_password(24),
                                                         'user_email' => "$login@example.invalid", 'role' => $role]);
        $user = new WP_User($id);
        $user->set_role($role);
        [$password] = WP_Application_Passwords::create_new_application_password($id, ['name' => 'pipeline-test']);
        $out[$login] = ['password' => WP_Application_Passwords::chunk_password($password),
                        'unfiltered_html' => user_can($id, 'unfiltered_html')];
    }
    $out['application_passwords'] = wp_is_application_passwords_available();
    break;
case 'permalinks':
    global $wp_rewrite;
    $wp_rewrite->set_permalink_structure($argv[2]);
    flush_rewrite_rules(false);
    $out['permalink_structure'] = get_option('permalink_structure');
    break;
case 'posts':   // every post, whatever its status, with its raw fields
    foreach (get_posts(['post_type' => 'post', 'post_status' => 'any', 'numberposts' => -1, 'orderby' => 'ID', 'order' => 'ASC']) as $p) {
        $out[] = ['id' => $p->ID, 'slug' => $p->post_name, 'status' => $p->post_status, 'title' => $p->post_title,
                  'content' => $p->post_content, 'author' => get_the_author_meta('user_login', $p->post_author),
                  'link' => get_permalink($p)];
    }
    break;
case 'reset':   // delete every post, for the next test
    foreach (get_posts(['post_type' => 'post', 'post_status' => 'any', 'numberposts' => -1, 'fields' => 'ids']) as $id) {
        wp_delete_post($id, true);
    }
    $out['deleted'] = true;
    break;
default:
    fwrite(STDERR, "unknown command $command\n");
    exit(2);
}
echo json_encode($out), "\n";
"""


class WordPressSite:
    """One WordPress on a free loopback port, with an administrator ("admin") and an author ("writer")."""

    def __init__(self, workdir: Path) -> None:
        self.dir = Path(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_name = f"pipeline_wp_{secrets.token_hex(4)}"
        self.db_password = secrets.token_hex(12)
        self.passwords: dict[str, str] = {}
        self.unfiltered_html: dict[str, bool] = {}
        self.proc: subprocess.Popen | None = None
        self._db_created = False
        self.mysql = mysql_target()
        self.own_db: OwnMariaDB | None = None

    # --- MariaDB ------------------------------------------------------------

    def _sql(self, statement: str) -> None:
        host, port, user, password = self.mysql
        client = shutil.which("mariadb") or shutil.which("mysql")
        env = {**os.environ, "MYSQL_PWD": password}
        subprocess.run([client, f"-h{host}", f"-P{port}", f"-u{user}", "-e", statement], check=True, env=env,
                       capture_output=True, text=True, timeout=30)

    # --- lifecycle ----------------------------------------------------------

    def start(self) -> WordPressSite:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not _reachable(*self.mysql[:2]) and own_mariadb_possible():
            self.own_db = OwnMariaDB(self.dir / "mariadb")
            self.own_db.dir.mkdir()
            self.mysql = self.own_db.start()
        host, port, _, _ = self.mysql
        self._sql(f"CREATE DATABASE `{self.db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci; "
                  f"CREATE USER '{self.db_name}'@'%' IDENTIFIED BY '{self.db_password}'; "
                  f"GRANT ALL PRIVILEGES ON `{self.db_name}`.* TO '{self.db_name}'@'%'; "
                  f"CREATE USER '{self.db_name}'@'localhost' IDENTIFIED BY '{self.db_password}'; "
                  f"GRANT ALL PRIVILEGES ON `{self.db_name}`.* TO '{self.db_name}'@'localhost';")
        self._db_created = True
        (self.dir / "site.json").write_text(json.dumps({
            "db_name": self.db_name, "db_user": self.db_name, "db_password": self.db_password,
            "db_host": f"{host}:{port}", "dead_port": free_port(), "url": self.url, "root": str(WP_ROOT),
            "salt": secrets.token_hex(16)}), encoding="utf-8")
        (self.dir / "bootstrap.php").write_text(BOOTSTRAP, encoding="utf-8")
        (self.dir / "router.php").write_text(ROUTER, encoding="utf-8")
        (self.dir / "cli.php").write_text(CLI, encoding="utf-8")
        self.start_php()
        users = self.cli("install", json.dumps(USERS))
        assert users.pop("application_passwords"), "WordPress refuses application passwords (WP_ENVIRONMENT_TYPE)"
        self.passwords = {login: u["password"] for login, u in users.items()}
        self.unfiltered_html = {login: u["unfiltered_html"] for login, u in users.items()}
        return self

    def start_php(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = open(self.dir / "php.log", "ab")  # noqa: SIM115  (the server's stdout, open while it runs)
        # Two workers: a lookup can be answered while a slow create is still running, as on a real server.
        self.proc = subprocess.Popen(["php", "-S", f"127.0.0.1:{self.port}", "-t", str(WP_ROOT), str(self.dir / "router.php")],
                                     cwd=self.dir, stdout=log, stderr=log, env={**os.environ, "PHP_CLI_SERVER_WORKERS": "2"},
                                     start_new_session=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"php -S exited: {(self.dir / 'php.log').read_text(errors='replace')[-500:]}") from None
                time.sleep(0.05)
        raise RuntimeError("php -S did not start listening in 15 s")

    def stop_php(self) -> None:
        """End php -S and its workers by PID (they share the session it was started in)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        self.stop_php()
        if self._db_created:
            self._sql(f"DROP DATABASE IF EXISTS `{self.db_name}`; DROP USER IF EXISTS '{self.db_name}'@'%'; "
                      f"DROP USER IF EXISTS '{self.db_name}'@'localhost';")
            self._db_created = False
        if self.own_db is not None:
            self.own_db.stop()

    # --- knobs --------------------------------------------------------------

    def cli(self, *args: str):
        proc = subprocess.run(["php", str(self.dir / "cli.php"), *args], capture_output=True, text=True, timeout=60,
                              cwd=self.dir)
        if proc.returncode != 0:
            raise RuntimeError(f"php cli.php {args[0]}: exit {proc.returncode}: {proc.stderr[-500:]} {proc.stdout[-500:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def permalinks(self, mode: str) -> None:
        assert self.cli("permalinks", PERMALINKS[mode])["permalink_structure"] == PERMALINKS[mode]

    def reset(self) -> None:
        self.cli("reset")

    def posts(self) -> list[dict]:
        return self.cli("posts")

    def database_down(self, down: bool = True) -> None:
        flag = self.dir / "db-down"
        if down:
            flag.touch()
        else:
            flag.unlink(missing_ok=True)

    def get(self, url: str) -> httpx.Response:
        return httpx.get(url, timeout=30, follow_redirects=False)
