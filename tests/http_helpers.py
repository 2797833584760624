"""A real HTTP server on 127.0.0.1 for the tests of remote reads."""

import contextlib
import functools
import http.server
import threading


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder's files and logs nothing."""

    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve(directory, handler=QuietHandler):
    """Serve ``directory`` with ``handler`` on a free port; yields the base URL.

    The server and its thread end when the block does.
    """
    bound = functools.partial(handler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), bound)
    thread = threading.Thread(target=httpd.serve_forever, name="test-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
