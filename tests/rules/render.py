# -*- coding: utf-8 -*-
"""Render the monitoring role's alert rules with its defaults and run promtool's unit tests on them (make rules).

    python tests/rules/render.py [--promtool PATH] [OUT_DIR]

The rule file is rendered from roles/monitoring/templates/llmops-sglang.rules.yml.j2 with the role's own defaults
(roles/monitoring/defaults/main.yml: the tests hold the shipped values, monitoring_alert_for 2m and so on), written
with every tests/rules/*.test.yml beside it in OUT_DIR (default .build/rules), checked with `promtool check rules`
and tested with `promtool test rules`. The template uses plain variables only, so Jinja2 renders it as Ansible's
template module would (StrictUndefined: a variable the defaults lack fails here, as it would in the role).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / 'roles' / 'monitoring'
HERE = Path(__file__).resolve().parent
RULES = 'llmops-sglang.rules.yml'


def render(out_dir):
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text(encoding='utf-8'))
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string((ROLE / 'templates' / (RULES + '.j2')).read_text(encoding='utf-8'))
    text = template.render(dict(defaults, ansible_managed='Rendered by tests/rules/render.py'))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RULES).write_text(text, encoding='utf-8')
    tests = sorted(HERE.glob('*.test.yml'))
    for test in tests:
        shutil.copyfile(test, out_dir / test.name)
    return tests


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('out_dir', nargs='?', default=str(ROOT / '.build' / 'rules'))
    parser.add_argument('--promtool', default=shutil.which('promtool') or 'promtool')
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir)
    tests = render(out_dir)
    if not tests:
        print('render.py: no tests/rules/*.test.yml', file=sys.stderr)
        return 1
    if not Path(args.promtool).exists() and not shutil.which(args.promtool):
        print('render.py: promtool not found (Debian: apt-get install --no-install-recommends prometheus)', file=sys.stderr)
        return 1
    for cmd in ([args.promtool, 'check', 'rules', RULES], [args.promtool, 'test', 'rules'] + [t.name for t in tests]):
        print('+ ' + ' '.join(cmd), flush=True)
        if subprocess.run(cmd, cwd=str(out_dir), check=False).returncode != 0:
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
