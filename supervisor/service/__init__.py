"""Running under systemd: sd_notify, the loop watchdog, SIGHUP reloads, unit installation.

Import the submodules directly (`supervisor.service.sdnotify`, `.watchdog`,
`.reload`, `.install`); this package imports nothing so that each stays cheap.
"""
