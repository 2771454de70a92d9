"""Runs the OpenStack client's own entry point, openstackclient.shell.main, once per request
in one Python process, so a test pays the client's start-up (~1.3 s of imports) once and not
per command. A request is a line of JSON, the argument list of one `openstack` command; the
answer is a line of JSON: {"rc": exit status, "out": stdout, "err": stderr}, as the
`openstack` script (sys.exit(main())) would give them."""

import contextlib
import io
import json
import logging
import sys

from openstackclient.common import clientmanager
from openstackclient.shell import main
from osc_lib.clientmanager import ClientCache


def forget_clients():
    """Forgets the API clients the last command made: osc_lib caches them on the
    ClientManager class (a ClientCache per API, set when the plugins load), not on the
    instance a command makes, so the next command would reuse the last one's endpoint."""
    for cls in clientmanager.ClientManager.__mro__:
        for v in vars(cls).values():
            if isinstance(v, ClientCache):
                v._handle = None


answers = sys.stdout
for line in sys.stdin:
    argv = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            # As the interpreter exits: None is 0, a number is the status, anything else is
            # printed to stderr and the status is 1.
            if e.code is None or isinstance(e.code, int):
                rc = e.code
            else:
                print(e.code, file=sys.stderr)
                rc = 1
        # Each run adds a console handler on the root logger for the stderr of its time.
        root = logging.getLogger("")
        for h in list(root.handlers):
            root.removeHandler(h)
        forget_clients()
    answers.write(json.dumps({"rc": rc or 0, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
    answers.flush()
