#!/usr/bin/env python3
"""Passages written by a model of another family, as a hosted writer would: written/<generator>_<lang>.txt -> .jsonl.

    python3 build_written.py

Each record of a .txt file is a header line and its text:

    === <topic group A|B> <register plain|human> <niche software|other> | <topic>
    <paragraphs, blank-line separated>

"plain" is the passage the writer gives when asked for a blog passage on the topic; "human" is the same writer
told to write as a person blogging in their own voice (first person, an anecdote, uneven rhythm, no stock
phrases). Topic group A goes to the calibration split and B to the test split, as for the generated passages.
The generator and family are named in WRITERS; they are never scored against their own text when left out.
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
WRITTEN = os.path.join(HERE, '..', 'written')
# The writer of the passages: this project's development sessions, a model of Anthropic's Claude family,
# writing each passage directly (no sampling loop, no editing after), in December 2026.
WRITERS = {'claude-session': 'anthropic'}
HEADER = re.compile(r'^=== ([AB]) (plain|human) (software|other) \| (.+)$')


def records(path):
    rows, head, lines = [], None, []
    for line in open(path, encoding='utf-8').read().splitlines() + ['=== END']:
        if line.startswith('=== '):
            if head:
                rows.append((head, '\n'.join(lines).strip()))
            head, lines = (HEADER.match(line) if line != '=== END' else None), []
            if line != '=== END' and head is None:
                raise SystemExit('%s: bad header %r' % (path, line))
        else:
            lines.append(line)
    return rows


def main():
    for name in sorted(os.listdir(WRITTEN)):
        m = re.fullmatch(r'(.+)_(en|zh)\.txt', name)
        if not m:
            continue
        generator, lang = m.groups()
        out = []
        for i, (head, text) in enumerate(records(os.path.join(WRITTEN, name))):
            group, register, niche, topic = head.groups()
            text = re.sub(r'\n\s*\n', '\n\n', text)
            out.append({'id': '%s-m-%s-%s-%03d' % (lang, generator, group, i), 'lang': lang, 'label': 'machine',
                        'source': '%s/%s' % (generator, register), 'generator': generator,
                        'family': WRITERS[generator], 'register': register, 'niche': niche, 'topic': topic,
                        'topic_group': group, 'text': text})
        with open(os.path.join(WRITTEN, '%s_%s.jsonl' % (generator, lang)), 'w', encoding='utf-8') as fh:
            for row in out:
                fh.write(json.dumps(row, ensure_ascii=False) + '\n')
        print(name, len(out), 'passages')


if __name__ == '__main__':
    main()
