# -*- coding: utf-8 -*-
"""The collection's metadata as Galaxy and Automation Hub read it: a LICENSE matching galaxy.yml's license, one
real project URL, and a changelog that `antsibull-changelog release` can turn into the next version's section."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

from urllib.parse import urlsplit

import yaml

from packaging_tools import ROOT, run, tool

URL_KEYS = ('repository', 'documentation', 'homepage', 'issues')
# Names reserved for examples and tests (RFC 2606, RFC 6761): placeholders, not a project's address.
RESERVED = ('example', 'invalid', 'localhost', 'test')


def test_the_license_file_is_the_gpl_3_that_galaxy_yml_names(galaxy, tarball_files):
    assert galaxy['license'] == ['GPL-3.0-or-later'] and 'license_file' not in galaxy
    head = (ROOT / 'LICENSE').read_text().splitlines()[:2]
    assert [line.strip() for line in head] == ['GNU GENERAL PUBLIC LICENSE', 'Version 3, 29 June 2007']
    assert 'LICENSE' in tarball_files


def test_the_project_urls_are_one_real_address(galaxy):
    repository = galaxy['repository']
    parts = urlsplit(repository)
    assert parts.scheme == 'https' and parts.path.strip('/').count('/') == 1, repository
    labels = parts.hostname.split('.')
    assert not any(label in RESERVED for label in labels), repository
    for key in URL_KEYS:
        assert galaxy.get(key, '').startswith(repository.rstrip('/')), (key, galaxy.get(key))
    assert galaxy['issues'] == repository + '/issues'
    # The documentation is the README the collection ships, on the default branch.
    assert galaxy['documentation'] == '%s/blob/main/%s' % (repository, galaxy['readme'])
    assert (ROOT / galaxy['readme']).is_file()


def test_the_changelog_releases_the_next_version(galaxy, tmp_path):
    """`antsibull-changelog release` on a scratch copy of the checkout (the real one is released by the maintainer,
    after the last fragment is in): it makes the version's section out of every fragment, and consumes them."""
    copy = tmp_path / 'ansible_collections' / galaxy['namespace'] / galaxy['name']
    listed = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=str(ROOT), stdout=subprocess.PIPE,
                            check=True).stdout.decode().split('\0')
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(str(ROOT / name), str(copy / name))
    fragments = sorted((copy / 'changelogs' / 'fragments').glob('*.y*ml'))
    summaries = [yaml.safe_load(path.read_text()).get('release_summary') for path in fragments]
    version = galaxy['version']
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path), PYTHONDONTWRITEBYTECODE='1')
    run([tool('antsibull-changelog'), 'release', '--version', version, '--date', '2026-12-01',
         '--ansible-doc-bin', tool('ansible-doc')], copy, env=env)
    changes = yaml.safe_load((copy / 'changelogs' / 'changelog.yaml').read_text())
    assert version in changes['releases'], changes['releases'].keys()
    text = (copy / 'CHANGELOG.rst').read_text()
    assert '\nv%s\n%s\n' % (version, '=' * (len(version) + 1)) in text
    for summary in filter(None, summaries):
        assert ' '.join(summary.split()) in ' '.join(text.split())
    assert sorted((copy / 'changelogs' / 'fragments').glob('*.y*ml')) == []
    # The release reads the collection's plugins: every module is in the changelog, new or from an earlier release.
    modules = {path.stem for path in (ROOT / 'plugins' / 'modules').glob('*.py')}
    recorded = {entry['name'] for release in changes['releases'].values() for entry in release.get('modules', [])}
    assert modules <= recorded, modules - recorded
