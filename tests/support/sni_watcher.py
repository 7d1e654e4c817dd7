"""A stand-in org.kde.StatusNotifierWatcher for the private test session bus: tray apps register their real
StatusNotifierItem with it, exactly as they would with a GNOME or KDE panel. Prints "ready" once it owns the name.

It also stands in for the desktop's notification daemon (org.freedesktop.Notifications): every Notify call is
logged to stderr as `notification: {"title": ..., "body": ...}`, which the harness reads back."""

from __future__ import annotations

import json
import sys
from typing import Any

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.kde.StatusNotifierWatcher"
PATH = "/StatusNotifierWatcher"
DEFAULT_ITEM_PATH = "/StatusNotifierItem"
INTROSPECTION = """
<node>
  <interface name="org.kde.StatusNotifierWatcher">
    <method name="RegisterStatusNotifierItem"><arg name="service" type="s" direction="in"/></method>
    <method name="RegisterStatusNotifierHost"><arg name="service" type="s" direction="in"/></method>
    <property name="RegisteredStatusNotifierItems" type="as" access="read"/>
    <property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
    <property name="ProtocolVersion" type="i" access="read"/>
    <signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
    <signal name="StatusNotifierItemUnregistered"><arg type="s"/></signal>
    <signal name="StatusNotifierHostRegistered"/>
    <signal name="StatusNotifierHostUnregistered"/>
  </interface>
</node>
"""


NOTIFICATIONS = "org.freedesktop.Notifications"
NOTIFICATIONS_PATH = "/org/freedesktop/Notifications"
NOTIFICATIONS_XML = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/>
      <arg type="s" direction="out"/>
    </method>
  </interface>
</node>
"""


class Notifications:
    def __init__(self) -> None:
        self.last_id = 0

    def on_call(
        self,
        connection: Gio.DBusConnection,
        sender: str,
        path: str,
        interface: str,
        method: str,
        params: GLib.Variant,
        invocation: Gio.DBusMethodInvocation,
    ) -> None:
        if method == "Notify":
            app, replaces, _icon, title, body, *_ = params.unpack()
            self.last_id = replaces or self.last_id + 1
            log("notification: " + json.dumps({"title": title, "body": body, "app": app}))
            invocation.return_value(GLib.Variant("(u)", (self.last_id,)))
        elif method == "GetCapabilities":
            invocation.return_value(GLib.Variant("(as)", (["body"],)))
        elif method == "GetServerInformation":
            invocation.return_value(GLib.Variant("(ssss)", ("stand-in", "hivenote-tests", "1", "1.2")))
        else:  # CloseNotification
            invocation.return_value(None)


class Watcher:
    """Items are kept as "<bus name><object path>", the form KDE's and GNOME's watchers publish."""

    def __init__(self, connection: Gio.DBusConnection) -> None:
        self.connection = connection
        # item id -> the bus names whose disappearance unregisters it (the name given and the caller)
        self.items: dict[str, set[str]] = {}
        self.hosts: set[str] = set()

    def on_call(
        self,
        connection: Gio.DBusConnection,
        sender: str,
        path: str,
        interface: str,
        method: str,
        params: GLib.Variant,
        invocation: Gio.DBusMethodInvocation,
    ) -> None:
        (service,) = params.unpack()
        if method == "RegisterStatusNotifierItem":
            # The argument is either an object path on the caller's connection or a bus name at the default path.
            bus_name, item_path = (sender, service) if service.startswith("/") else (service, DEFAULT_ITEM_PATH)
            item = bus_name + item_path
            log(f"register call: {item}")  # every call: a panel rebuilds the item each time (tests count them)
            if item not in self.items:
                self.items[item] = {bus_name, sender}
                log(f"item registered: {item}")
                self.emit("StatusNotifierItemRegistered", item)
        else:  # RegisterStatusNotifierHost
            self.hosts.add(service)
            self.emit("StatusNotifierHostRegistered", None)
        invocation.return_value(None)

    def on_get_property(
        self,
        connection: Gio.DBusConnection,
        sender: str,
        path: str,
        interface: str,
        name: str,
    ) -> GLib.Variant:
        if name == "RegisteredStatusNotifierItems":
            return GLib.Variant("as", list(self.items))  # in registration order
        if name == "IsStatusNotifierHostRegistered":
            return GLib.Variant("b", True)
        return GLib.Variant("i", 0)  # ProtocolVersion

    def on_name_owner_changed(
        self,
        connection: Gio.DBusConnection,
        sender: str | None,
        path: str,
        interface: str,
        signal: str,
        params: GLib.Variant,
    ) -> None:
        name, _old, new = params.unpack()
        if new:
            return
        for item, names in list(self.items.items()):
            if name in names:
                del self.items[item]
                log(f"item unregistered: {item}")
                self.emit("StatusNotifierItemUnregistered", item)

    def emit(self, signal: str, item: str | None) -> None:
        args = None if item is None else GLib.Variant("(s)", (item,))
        self.connection.emit_signal(None, PATH, NAME, signal, args)


def log(message: str) -> None:
    # stdout carries only the "ready" line the harness waits for; everything else goes to stderr.
    print(f"sni_watcher: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """`--notifications-only`: only the notification daemon (a desktop whose tray is an XEmbed one, like trayer)."""
    only_notifications = "--notifications-only" in argv
    connection = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    watcher = Watcher(connection)
    notifications = Notifications()
    connection.register_object(
        NOTIFICATIONS_PATH, Gio.DBusNodeInfo.new_for_xml(NOTIFICATIONS_XML).interfaces[0], notifications.on_call
    )
    loop = GLib.MainLoop()
    status = 0

    def acquired(*_: Any) -> None:
        print("ready", flush=True)

    def lost(*_: Any) -> None:
        nonlocal status
        log(f"could not own {NAME} (another watcher on this bus?)")
        status = 1
        loop.quit()

    if only_notifications:
        Gio.bus_own_name_on_connection(connection, NOTIFICATIONS, Gio.BusNameOwnerFlags.DO_NOT_QUEUE, acquired, lost)
        loop.run()
        return status
    node = Gio.DBusNodeInfo.new_for_xml(INTROSPECTION)
    connection.register_object(PATH, node.interfaces[0], watcher.on_call, watcher.on_get_property, None)
    Gio.bus_own_name_on_connection(connection, NOTIFICATIONS, Gio.BusNameOwnerFlags.DO_NOT_QUEUE, None, None)
    connection.signal_subscribe(
        "org.freedesktop.DBus",
        "org.freedesktop.DBus",
        "NameOwnerChanged",
        "/org/freedesktop/DBus",
        None,
        Gio.DBusSignalFlags.NONE,
        watcher.on_name_owner_changed,
    )
    Gio.bus_own_name_on_connection(connection, NAME, Gio.BusNameOwnerFlags.DO_NOT_QUEUE, acquired, lost)
    loop.run()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
