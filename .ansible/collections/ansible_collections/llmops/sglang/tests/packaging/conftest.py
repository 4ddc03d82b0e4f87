# -*- coding: utf-8 -*-
"""Fixtures of the packaging tests: they run the real tools (ansible-galaxy, ansible-builder, antsibull-changelog)
on this checkout and look at what they make."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tarfile

import pytest
import yaml

from packaging_tools import ROOT, run, tool


@pytest.fixture(scope='session')
def galaxy():
    return yaml.safe_load((ROOT / 'galaxy.yml').read_text())


@pytest.fixture(scope='session')
def collection_tarball(tmp_path_factory):
    """The collection as `ansible-galaxy collection build` makes it from this checkout (what `make build` ships)."""
    out = tmp_path_factory.mktemp('dist')
    run([tool('ansible-galaxy'), 'collection', 'build', '--output-path', str(out), str(ROOT)], ROOT)
    tarballs = sorted(out.glob('*.tar.gz'))
    assert len(tarballs) == 1, tarballs
    return tarballs[0]


@pytest.fixture(scope='session')
def tarball_files(collection_tarball):
    """FILES.json of the built tarball: {name: sha256} of every file."""
    with tarfile.open(str(collection_tarball)) as tar:
        files = yaml.safe_load(tar.extractfile('FILES.json').read())
    return {entry['name']: entry['chksum_sha256'] for entry in files['files'] if entry['ftype'] == 'file'}


@pytest.fixture(scope='session')
def ee_context(tmp_path_factory):
    """The build context `ansible-builder create` makes from execution-environment.yml (as `make ee` runs it)."""
    context = tmp_path_factory.mktemp('ee') / 'context'
    run([tool('ansible-builder'), 'create', '--file', str(ROOT / 'execution-environment.yml'), '--context', str(context),
         '--output-filename', 'Containerfile', '-v', '1'], ROOT, env=dict(os.environ, PYTHONDONTWRITEBYTECODE='1'))
    return context
