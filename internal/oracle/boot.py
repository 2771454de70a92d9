# Starts the real networking-sfc server (neutron-server with the flow classifier and SFC
# service plugins) on an SQLite database whose schema is created from the models' table
# definitions: neutron's migrations cannot run on SQLite (revision 1df244e556f5 alters
# constraints). Usage: boot.py CONFIG_FILE DATABASE_FILE. Run with /usr/bin/python3, where
# Debian installs the OpenStack libraries.
import sys

import eventlet

eventlet.monkey_patch()

import sqlalchemy as sa  # noqa: E402
from sqlalchemy import event  # noqa: E402

from neutron.db.migration.models import head  # noqa: E402
import neutron.db.models.port_forwarding  # noqa: E402,F401 Port.port_forwardings, read by get_ports
import networking_sfc.db.flowclassifier_db  # noqa: E402,F401 the flow classifier tables
import networking_sfc.db.sfc_db  # noqa: E402,F401 the sfc and service graph tables

config, database = sys.argv[1], sys.argv[2]
engine = sa.create_engine('sqlite:///' + database)


@event.listens_for(engine, 'connect')
def _foreign_keys(conn, _):
    conn.execute('PRAGMA foreign_keys=ON')


sa.orm.configure_mappers()
head.get_metadata().create_all(engine)
engine.dispose()

sys.argv = ['neutron-server', '--config-file', config]
from neutron.cmd.eventlet.server import main  # noqa: E402

main()
