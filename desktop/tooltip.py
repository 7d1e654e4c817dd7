"""The StatusNotifierItem `ToolTip` property, which libayatana-appindicator (pystray's `appindicator` backend) does not
export: panels that show tooltips from it (KDE Plasma, waybar, ...) and tools that read it got nothing.

It is added on the D-Bus connection the indicator exports its item on (the process's shared session bus), by a
message filter: a `Properties.Get` of `ToolTip` on the item is answered here, the indicator's answer to `GetAll`
gains it, and `NewToolTip` is sent when it changes. Everything else passes through untouched. The filter runs on
GDBus's worker thread; it never raises (a failure passes the message on as it came).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

ITEM = "org.kde.StatusNotifierItem"
PROPERTIES = "org.freedesktop.DBus.Properties"
ITEM_PATHS = ("/org/ayatana/NotificationItem/", "/org/kde/StatusNotifierItem")  # libayatana's, then the spec's
SIGNATURE = "(sa(iiay)ss)"  # icon name, icon pixmaps, title, text


class ToolTip:
    """The item's tooltip on `connection` (a Gio.DBusConnection): `show(title, text)` from any thread."""

    def __init__(self, connection: Any, title: str = "", text: str = "") -> None:
        self.connection = connection
        self._lock = threading.Lock()
        self._title, self._text = title, text
        self._path = ""  # the item's object path, once a host asked
        self._get_all: set[tuple[str, int]] = set()  # (sender, serial) of GetAll calls on the item, to answer
        self._filter_id = connection.add_filter(self._filter)

    def show(self, title: str, text: str) -> None:
        with self._lock:
            if (title, text) == (self._title, self._text):
                return
            self._title, self._text = title, text
            path = self._path
        if path:
            try:
                self.connection.emit_signal(None, path, ITEM, "NewToolTip", None)
            except Exception as exc:  # the bus went away: nothing to tell
                log.info("NewToolTip not sent (%s)", exc)

    def close(self) -> None:
        self.connection.remove_filter(self._filter_id)

    def value(self) -> Any:
        from gi.repository import GLib

        with self._lock:
            return GLib.Variant(SIGNATURE, ("", [], self._title, self._text))

    # -- on GDBus's worker thread ------------------------------------------------------------------------------

    def _filter(self, connection: Any, message: Any, incoming: bool) -> Any:
        try:
            return self._filtered(connection, message, incoming)
        except Exception:
            log.exception("the tray's tooltip filter failed; the message passes as it came")
            return message

    def _filtered(self, connection: Any, message: Any, incoming: bool) -> Any:
        from gi.repository import Gio, GLib

        kind = message.get_message_type()
        if incoming and kind == Gio.DBusMessageType.METHOD_CALL and message.get_interface() == PROPERTIES:
            path = message.get_path() or ""
            body = message.get_body()
            if not path.startswith(ITEM_PATHS) or body is None or body.n_children() == 0:
                return message
            if body.get_child_value(0).get_string() != ITEM:
                return message
            with self._lock:
                self._path = path
            member = message.get_member()
            if member == "Get" and body.n_children() == 2 and body.get_child_value(1).get_string() == "ToolTip":
                reply = Gio.DBusMessage.new_method_reply(message)
                reply.set_body(GLib.Variant.new_tuple(GLib.Variant.new_variant(self.value())))
                connection.send_message(reply, Gio.DBusSendMessageFlags.NONE)
                return None  # answered here: the indicator would say there is no such property
            if member == "GetAll":
                with self._lock:
                    self._get_all.add((message.get_sender() or "", message.get_serial()))
            return message
        if not incoming and kind == Gio.DBusMessageType.METHOD_RETURN:
            key = (message.get_destination() or "", message.get_reply_serial())
            with self._lock:
                if key not in self._get_all:
                    return message
                self._get_all.discard(key)
            return self._with_tooltip(message)
        return message

    def _with_tooltip(self, message: Any) -> Any:
        """A copy of the indicator's answer to GetAll, with ToolTip among its properties."""
        from gi.repository import GLib

        properties = message.get_body().get_child_value(0)  # a{sv}
        entries = [properties.get_child_value(i) for i in range(properties.n_children())]
        entries.append(GLib.Variant.new_dict_entry(GLib.Variant("s", "ToolTip"), GLib.Variant("v", self.value())))
        answer = message.copy()
        answer.set_body(GLib.Variant.new_tuple(GLib.Variant.new_array(GLib.VariantType("{sv}"), entries)))
        return answer
