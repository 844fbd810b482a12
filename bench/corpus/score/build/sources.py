"""Sources of the human corpus: one entry per registry package version.

dir: folder under dl/; archive: the file the ordinary client saved there;
files: glob patterns of members (path without the archive's top folder).
date: release date; when absent it is read from the archive's PKG-INFO mtime
(the sdist build time), which precedes the upload.
"""

def py(pkg, ver, files, domain, archive=None, d='pypi', **kw):
    r = dict(source='pypi:' + pkg.lower(), pkg=pkg, version=ver, dir=d,
             archive=archive or '%s-%s.tar.gz' % (pkg, ver), files=files, domain=domain)
    r.update(kw)
    return r


def npm(pkg, ver, files, domain, date, date_src, **kw):
    base = pkg.lstrip('@').replace('/', '-')
    r = dict(source='npm:' + pkg, pkg=pkg, version=ver, dir='npm',
             archive='%s-%s.tgz' % (base, ver), files=files, domain=domain,
             date=date, date_src=date_src)
    r.update(kw)
    return r


EN_FILES = ['doc/*.rst', 'docs/*.rst', 'doc/*.txt', 'docs/*.txt', 'doc/*.md', 'docs/*.md', 'README*', '*.rst', '*.txt']
EN_EXCLUDE = ['*test*', '*egg-info*', '*LICENSE*', '*COPYING*', '*requirements*', '*AUTHORS*', '*CONTRIBUTORS*',
              '*THANKS*', '*/license.rst', '*/_static/*', '*/_templates/*']


def pyen(pkg, ver, domain, files=EN_FILES, **kw):
    kw.setdefault('exclude', EN_EXCLUDE)
    return py(pkg, ver, files, domain, **kw)


SOURCES_EN = [
    pyen('Flask', '2.0.2', 'web', licence='BSD-3-Clause'),
    pyen('Jinja2', '3.0.3', 'languages', licence='BSD-3-Clause'),
    pyen('Werkzeug', '2.0.2', 'web', licence='BSD-3-Clause'),
    pyen('click', '8.0.3', 'cli', licence='BSD-3-Clause'),
    pyen('attrs', '21.2.0', 'languages', licence='MIT'),
    pyen('Sphinx', '4.3.2', 'documentation', licence='BSD-2-Clause'),
    pyen('celery', '5.2.1', 'distributed-systems', licence='BSD-3-Clause'),
    pyen('Scrapy', '2.5.1', 'web-scraping', licence='BSD-3-Clause'),
    pyen('docutils', '0.17.1', 'documentation', licence='Public-Domain AND BSD-2-Clause'),
    pyen('Django', '3.2.10', 'web', licence='BSD-3-Clause'),
    pyen('pip', '21.3.1', 'packaging', licence='MIT'),
    pyen('mypy', '0.910', 'languages', licence='MIT'),
    pyen('Cython', '0.29.26', 'languages', licence='Apache-2.0'),
    pyen('Pygments', '2.10.0', 'languages', licence='BSD-2-Clause'),
    pyen('SQLAlchemy', '1.4.29', 'databases', licence='MIT'),
    pyen('alembic', '1.7.5', 'databases', licence='MIT'),
    pyen('beets', '1.5.0', 'music', licence='MIT'),
    pyen('coverage', '6.2', 'testing', licence='Apache-2.0'),
    pyen('gunicorn', '20.1.0', 'devops', licence='MIT'),
    pyen('kombu', '5.2.2', 'distributed-systems', licence='BSD-3-Clause'),
    pyen('peewee', '3.14.8', 'databases', licence='MIT'),
    pyen('pymongo', '3.12.3', 'databases', licence='Apache-2.0'),
    pyen('pyramid', '2.0', 'web', licence='BSD-derived (Repoze Public License)'),
    pyen('tornado', '6.1', 'web', licence='Apache-2.0'),
    pyen('trio', '0.19.0', 'concurrency', licence='MIT OR Apache-2.0'),
    pyen('marshmallow', '3.14.1', 'web', licence='MIT'),
    pyen('virtualenv', '20.10.0', 'packaging', licence='MIT'),
    pyen('networkx', '2.6.3', 'science', licence='BSD-3-Clause'),
    pyen('pelican', '4.7.1', 'web', licence='AGPL-3.0'),
    pyen('pexpect', '4.8.0', 'os', licence='ISC'),
    pyen('mercurial', '5.9.3', 'vcs', files=['mercurial/helptext/*.txt', 'mercurial/helptext/*/*.txt', 'README*'],
         licence='GPL-2.0-or-later'),
    pyen('falcon', '3.0.1', 'web', licence='Apache-2.0'),
    pyen('aiohttp', '3.8.1', 'web', licence='Apache-2.0'),
    pyen('Markdown', '3.3.6', 'documentation', licence='BSD-3-Clause'),
    pyen('structlog', '21.5.0', 'devops', licence='MIT OR Apache-2.0'),
    pyen('simpy', '4.0.1', 'science', licence='MIT'),
    pyen('pyinstaller', '4.7', 'packaging', licence='GPL-2.0-or-later WITH PyInstaller exception'),
    pyen('urllib3', '1.26.7', 'web', licence='MIT'),
]
def deb(pkg, ver, files, domain, date, **kw):
    r = dict(source='debian:' + pkg, pkg=pkg, version=ver, dir='deb11',
             archive='%s_%s_all.deb' % (pkg, ver), files=files, domain=domain, date=date)
    r.update(kw)
    return r


SOURCES_ZH = [
    # Debian 11 (bullseye) documentation packages, fetched with apt-get download from
    # bullseye; date = top entry of the package's changelog.Debian. Human translations.
    deb('debian-reference-zh-cn', '2.78', ['usr/share/debian-reference/*.zh-cn.html'], 'os+translation', '2021-04-10',
        author='Osamu Aoki (zh-CN translation team)', licence='GPL-2.0-or-later'),
    deb('maint-guide-zh-cn', '1.2.46', ['usr/share/doc/maint-guide-zh-cn/html/*.html'], 'packaging+translation', '2020-12-24',
        author='Josip Rodin, Osamu Aoki (zh-CN translation team)', licence='GPL-2.0-or-later OR MIT'),
    deb('debian-faq-zh-cn', '10.1', ['usr/share/doc/debian/FAQ/zh-cn/*.html'], 'os+translation', '2019-10-02',
        author='Debian FAQ authors (zh-CN translation team)', licence='GPL-2.0-or-later'),]

ZH_FILES = ['README*', '*/README*', 'doc/*', 'docs/*', 'doc/*/*', 'docs/*/*', 'docs/*/*/*', 'PKG-INFO']


def pyzh(pkg, ver, domain, archive=None, files=ZH_FILES, **kw):
    return py(pkg, ver, files, domain, archive=archive, d='pypi_zh', **kw)


def deb(pkg, ver, files, domain, date, **kw):
    r = dict(source='debian:' + pkg, pkg=pkg, version=ver, dir='deb11',
             archive='%s_%s_all.deb' % (pkg, ver), files=files, domain=domain, date=date)
    r.update(kw)
    return r


SOURCES_ZH = [
    # Debian 11 (bullseye) documentation packages, fetched with apt-get download from
    # bullseye; date = top entry of the package's changelog.Debian. Human translations.
    deb('debian-reference-zh-cn', '2.78', ['usr/share/debian-reference/*.zh-cn.html'], 'os+translation', '2021-04-10',
        author='Osamu Aoki (zh-CN translation team)', licence='GPL-2.0-or-later'),
    deb('maint-guide-zh-cn', '1.2.46', ['usr/share/doc/maint-guide-zh-cn/html/*.html'], 'packaging+translation', '2020-12-24',
        author='Josip Rodin, Osamu Aoki (zh-CN translation team)', licence='GPL-2.0-or-later OR MIT'),
    deb('debian-faq-zh-cn', '10.1', ['usr/share/doc/debian/FAQ/zh-cn/*.html'], 'os+translation', '2019-10-02',
        author='Debian FAQ authors (zh-CN translation team)', licence='GPL-2.0-or-later'),
    pyzh('jieba', '0.42.1', 'nlp'),
    pyzh('pycorrector', '0.4.2', 'nlp'),
    pyzh('qqbot', '2.3.10', 'chatbots', archive='qqbot-2.3.10.zip'),
    pyzh('snownlp', '0.12.3', 'nlp'),
    pyzh('synonyms', '3.16.0', 'nlp'),
    pyzh('wxpy', '0.3.9.8', 'chatbots'),
]
