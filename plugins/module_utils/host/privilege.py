# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a task that changes the host runs as root, and what to tell an operator whose login is not. Pure, no I/O.

The server role writes /etc/systemd/system and /etc/sglang (root-only files), installs packages, pins packages in a
root-owned venv, starts units and reads their whole journal: it needs root on the host. Operators usually log in as
an unprivileged user and escalate with sudo (``become``); a play that forgot ``become`` must be told so before the
first change, in words that name the settings, not with the first ``Permission denied`` of some task.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

HOW = ('log in as a user that may use sudo and set become: ansible_become: true in the inventory (with ansible_user '
       'the login user, as inventories/ct200/group_vars/ct200.yml shows) or become: true on the play')


def root_refusal(euid, user, doing):
    """None when euid is root's; else one sentence: what needs root, who the task runs as, and what to set."""
    if euid == 0:
        return None
    who = '%s (uid %d)' % (user, euid) if user else 'uid %d' % euid
    return '%s needs root on the host, and this task runs as %s: %s.' % (doing, who, HOW)
