"""Stand-in for the get-pip.py script that ansible-test downloads to bootstrap pip in its sanity venvs.

ansible-test fetches get-pip.py from a host outside the package registries this project may use. This script does
the same job with what is allowed: pip from the interpreter's own bundled wheel (ensurepip), then the exact
pip release and packages ansible-test asked for, from the package index. `make sanity` copies it into
ansible-test's cache under the name ansible-test looks for.
"""
import ensurepip
import os
import subprocess
import sys

# get-pip.py options that `pip install` does not know
GET_PIP_ONLY_OPTIONS = ('--no-setuptools', '--no-wheel')


def main():
    """Install pip, then the packages named on the command line, as get-pip.py would."""
    ensurepip.bootstrap(upgrade=True)
    # ensurepip leaves PIP_CONFIG_FILE=/dev/null in os.environ; the real install must see the machine's pip config.
    env = dict(os.environ)
    env.pop('PIP_CONFIG_FILE', None)
    pip_args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--quiet'] + pip_args, env=env)


if __name__ == '__main__':
    main()
