# -*- coding: utf-8 -*-
"""execution-environment.yml, turned into a build context by the real `ansible-builder create`.

No container runtime runs here, so the stages of the Containerfile that make the image's content are replayed with
the same tools on the same files: the galaxy stage's `ansible-galaxy collection install -r requirements.yml` in the
context's _build dir (its WORKDIR /build), then the builder stage's introspect.py from the context on what it
installed, whose bindep output is resolved by bindep for an RPM and a Debian image."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import sys

import pytest
import yaml

from bindep.depends import Depends
from packaging.requirements import Requirement
from packaging.version import Version

from packaging_tools import ROOT, run, tool

DEFINITION = yaml.safe_load((ROOT / 'execution-environment.yml').read_text()) if (ROOT / 'execution-environment.yml').exists() else {}

# Parts of the checkout that are for developing the collection, not for running it: the image leaves them out.
CHECKOUT_ONLY = {'.ci', '.config', '.gitignore', 'Makefile', 'ansible.cfg', 'bench', 'changelogs', 'CHANGELOG.rst', 'docs',
                 'execution-environment.yml', 'inventories', 'tests'}

# The platform profiles bindep reports on the two families (bindep's own names; `default` is always active).
RPM_IMAGE = ['default', 'platform:rpm', 'platform:redhat', 'platform:centos', 'platform:centos-9']
DEB_IMAGE = ['default', 'platform:dpkg', 'platform:debian', 'platform:debian-12']


def requirement_names(text):
    names = set()
    for line in text.splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            names.add(Requirement(line).name.lower())
    return names


def packages(bindep_text, profiles):
    return {rule[0] for rule in Depends(bindep_text).active_rules(profiles)}


@pytest.fixture(scope='module')
def containerfile(ee_context):
    return (ee_context / 'Containerfile').read_text()


@pytest.fixture(scope='module')
def image_collections(ee_context, tmp_path_factory):
    """What the galaxy stage puts in /usr/share/ansible/collections, installed by the same command from the context."""
    dest = tmp_path_factory.mktemp('image') / 'collections'
    # The image knows no other collections: make exports a collections path and PYTHONPATH with the checkout as
    # llmops.sglang, which ansible-galaxy would take for the collection installed already ("Nothing to do").
    env = dict((key, value) for key, value in os.environ.items() if key != 'PYTHONPATH')
    env['ANSIBLE_COLLECTIONS_PATH'] = str(dest)
    run([tool('ansible-galaxy'), 'collection', 'install', '-r', 'requirements.yml', '--collections-path', str(dest)],
        ee_context / '_build', env=env)
    return dest


@pytest.fixture(scope='module')
def introspected(ee_context, image_collections, tmp_path_factory):
    """The builder stage's dependency lists: the context's own introspect.py on the installed collections."""
    out = tmp_path_factory.mktemp('introspect')
    run([sys.executable, str(ee_context / '_build' / 'scripts' / 'introspect.py'), 'introspect', str(image_collections),
         '--write-pip', str(out / 'requirements.txt'), '--write-bindep', str(out / 'bindep.txt')], out)
    return {name: (out / name).read_text() for name in ('requirements.txt', 'bindep.txt')}


def test_the_image_gets_an_ansible_core_this_collection_is_tested_with():
    """The definition's ansible-core is inside requirements.txt's range and meta/runtime.yml's, on a Python it runs on."""
    core = Requirement(DEFINITION['dependencies']['ansible_core']['package_pip'])
    assert core.name == 'ansible-core'
    lowest = Version(min((s.version for s in core.specifier if s.operator == '>='), key=Version))
    wanted = [Requirement(line) for line in (ROOT / 'requirements.txt').read_text().splitlines()
              if line.strip().startswith('ansible-core')]
    assert len(wanted) == 1 and lowest in wanted[0].specifier, (core, wanted)
    requires = yaml.safe_load((ROOT / 'meta' / 'runtime.yml').read_text())['requires_ansible']
    assert lowest >= Version(requires.lstrip('>=')), (core, requires)
    # ansible-core 2.20 and later run the controller on Python 3.12 or newer only.
    python = DEFINITION['dependencies']['python_interpreter']['python_path']
    assert lowest < Version('2.20') or Version(python.rsplit('python', 1)[1]) >= Version('3.12'), (core, python)


def test_the_containerfile_installs_the_collection_then_what_it_needs(containerfile):
    steps = containerfile.splitlines()

    def index(fragment):
        hits = [i for i, step in enumerate(steps) if fragment in step]
        assert hits, '%r not in the Containerfile:\n%s' % (fragment, containerfile)
        return hits[0]

    python = DEFINITION['dependencies']['python_interpreter']['python_path']
    assert 'ARG PYCMD="%s"' % python in steps
    assert 'ARG EE_BASE_IMAGE="%s"' % DEFINITION['images']['base_image']['name'] in steps
    refs = steps[index('ARG ANSIBLE_INSTALL_REFS=')]
    assert DEFINITION['dependencies']['ansible_core']['package_pip'] in refs and 'ansible-runner' in refs
    # Galaxy stage, at WORKDIR /build: the collection; then the builder stage computes and fetches its needs;
    # the final stage installs the system packages bindep names.
    order = [index('COPY _build /build'),
             index('ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml'),
             index('/output/scripts/introspect.py introspect'), index('RUN /output/scripts/assemble'),
             index('/output/scripts/install-from-bindep')]
    assert order == sorted(order), containerfile


def test_the_build_stage_installs_this_collection_whole(ee_context, image_collections, galaxy, tarball_files):
    """The collection the image gets is llmops.sglang at galaxy.yml's version, with every file the released tarball
    has for running it (plugins, roles, playbooks, meta, metadata), byte for byte."""
    assert yaml.safe_load((ee_context / '_build' / 'requirements.yml').read_text())['collections']
    installed = image_collections / 'ansible_collections' / galaxy['namespace'] / galaxy['name']
    info = json.loads((installed / 'MANIFEST.json').read_text())['collection_info']
    assert (info['namespace'], info['name'], info['version']) == (galaxy['namespace'], galaxy['name'], galaxy['version'])
    runtime = {name: digest for name, digest in tarball_files.items() if name.split('/', 1)[0] not in CHECKOUT_ONLY}
    assert 'plugins/modules/sglang_wait_ready.py' in runtime and 'roles/server/tasks/main.yml' in runtime
    missing = sorted(name for name in runtime if not (installed / name).is_file())
    assert missing == []
    differs = sorted(name for name, digest in runtime.items()
                     if hashlib.sha256((installed / name).read_bytes()).hexdigest() != digest)
    assert differs == []


def test_the_builder_stage_finds_the_collections_python_needs(introspected):
    """requirements.txt reaches the image's pip, from the installed collection (ansible-core is the image's own)."""
    expected = requirement_names((ROOT / 'requirements.txt').read_text()) - {'ansible-core'}
    assert expected >= {'requests', 'jmespath'}
    assert requirement_names(introspected['requirements.txt']) == expected
    assert 'from collection llmops.sglang' in introspected['requirements.txt']


@pytest.mark.parametrize('profiles, client', [(RPM_IMAGE, 'openssh-clients'), (DEB_IMAGE, 'openssh-client')],
                         ids=['rpm', 'deb'])
def test_the_builder_stage_finds_the_ssh_client_under_its_package_name(introspected, profiles, client):
    """Ansible's ssh connection needs the OpenSSH client: bindep must name the package that exists on the image's
    distribution (openssh-clients on RPM distributions: there is no openssh-client package there)."""
    assert packages(introspected['bindep.txt'], profiles) == {client}
