"""The dataset upload limit, enforced while the request body streams in: once the files of a request pass
DATASET_MAX_UPLOAD_BYTES, Django stops reading the body, and the form says why.

Django reads the body when a view (or CsrfViewMiddleware) first touches request.POST or request.FILES, so
the handler must be installed before that: `limited_upload` does it in a csrf_exempt wrapper around the
csrf_protect'ed view, as Django's docs on changing upload handlers per view describe."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt, csrf_protect

from workbench.datasets.limits import size_text


class UploadLimitHandler(FileUploadHandler):
    """First of the request's upload handlers: counts the bytes of every file part as they arrive and
    stops the upload past `limit`. StopUpload(connection_reset=True) makes Django neither read the rest
    of the body nor drain it; the parser closes the partly written temporary file, which deletes it."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.received = 0
        self.refusal: str | None = None

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.refusal = (
                f"the file is larger than the upload limit of {size_text(self.limit)}; "
                "nothing past the limit was read or kept"
            )
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) builds the uploaded file


def limited_upload(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Decorate a dataset upload view: its request's files may total DATASET_MAX_UPLOAD_BYTES at most
    (see `upload_refusal`); CSRF is still checked, after the handler is in place."""
    protected = csrf_protect(view)

    @csrf_exempt
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        request.upload_handlers.insert(0, UploadLimitHandler(request, settings.DATASET_MAX_UPLOAD_BYTES))
        return protected(request, *args, **kwargs)

    return wrapper


def upload_refusal(request: HttpRequest) -> str | None:
    """Why the upload limit stopped this request's upload, or None; read it after request.FILES."""
    for handler in request.upload_handlers:
        if isinstance(handler, UploadLimitHandler):
            return handler.refusal
    return None
