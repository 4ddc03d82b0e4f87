"""Render every argv the role would run for an inventory, with the role's and the deploy playbook's own code.

`render(inventory, hosts=None)` writes a playbook next to render/render.yml whose play is deploy_k26.yml's (its hosts
expression, vars files and vars) and whose one task is deploy_k26.yml's include_role task (its vars, loop and loop_control taken verbatim
from the playbook file), but including render/render.yml: the role's validate.yml renders __sglang_argv, vars/main.yml
__sglang_command, and each (host, instance) lands in a JSON file. ansible-playbook runs it with connection local, so
no host is contacted and nothing but those files is written.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(ROOT, 'playbooks', 'deploy_k26.yml')
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def _include_role_task(tasks):
    for task in tasks:
        if 'block' in task:
            found = _include_role_task(task['block'])
            if found:
                return found
        role = task.get('ansible.builtin.include_role') or task.get('include_role')
        if role and role.get('name') == 'llmops.sglang.server':
            return task
    return None


def render_playbook():
    """deploy_k26.yml's first play that includes the role, and that include_role task, aimed at render/render.yml."""
    with open(DEPLOY) as handle:
        plays = yaml.safe_load(handle)
    # The first play that includes the role: the plan pass (an import_playbook of the routers comes before it).
    found = [(play, _include_role_task(play['tasks'])) for play in plays if play.get('tasks')]
    found = [(play, task) for play, task in found if task is not None]
    if not found:
        raise RuntimeError('%s has no include_role of llmops.sglang.server' % DEPLOY)
    play, task = found[0]
    render = {
        'name': 'Render each instance as deploy_k26.yml would deploy it',
        'ansible.builtin.include_tasks': os.path.join(HERE, 'render', 'render.yml'),
        'vars': task['vars'],
        'loop': task['loop'],
        'loop_control': task['loop_control'],
    }
    # Its vars files too (vars/fleet.yml: the run's hosts, each host's instances), by their path in playbooks/.
    vars_files = [os.path.join(os.path.dirname(DEPLOY), path) for path in play.get('vars_files') or []]
    return [{'name': 'Render the role argv for every host', 'hosts': play['hosts'], 'gather_facts': False,
             'connection': 'local', 'vars_files': vars_files, 'vars': play.get('vars') or {}, 'tasks': [render]}]


def render(inventories, extra_vars=None):
    """{(host, instance): {'argv': [...], 'command': [...]}} for the inventory sources (paths relative to ROOT)."""
    with tempfile.TemporaryDirectory(prefix='conformance-render-') as tmp:
        out = os.path.join(tmp, 'out')
        os.mkdir(out)
        playbook = os.path.join(tmp, 'render.yml')
        with open(playbook, 'w') as handle:
            yaml.safe_dump(render_playbook(), handle, sort_keys=False)
        variables = dict(extra_vars or {}, conformance_out=out, ansible_python_interpreter=sys.executable)
        cmd = [ANSIBLE_PLAYBOOK, playbook, '-e', json.dumps(variables)]
        for inventory in inventories:
            cmd += ['-i', os.path.join(ROOT, inventory) if not os.path.isabs(inventory) else inventory]
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'), ANSIBLE_RETRY_FILES_ENABLED='0',
                   ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
        run = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, check=False)
        if run.returncode != 0:
            raise AssertionError('rendering failed (%s):\n%s' % (' '.join(cmd), run.stdout[-6000:]))
        rendered = {}
        for path in sorted(glob.glob(os.path.join(out, '*.json'))):
            with open(path) as handle:
                item = json.load(handle)
            rendered[(item['host'], item['instance'])] = item
        return rendered
