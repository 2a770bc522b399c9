"""The errors `serve` answers with, in TEI's shape (`{"error", "error_type"}`) and statuses."""

from __future__ import annotations

from starlette.responses import JSONResponse

STATUS = {"Empty": 400, "Validation": 422, "Tokenizer": 422, "Backend": 424, "Overloaded": 429, "Unhealthy": 503,
          "Disconnected": 499, "Unauthorized": 401}  # 499: nginx's "client closed request"; nobody is left to read it

class ApiError(Exception):
    def __init__(self, error_type: str, message: str, status: int | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.error_type, self.message = error_type, message
        self.status = status or STATUS[error_type]
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        headers = {"retry-after": str(self.retry_after)} if self.retry_after is not None else None
        return JSONResponse({"error": self.message, "error_type": self.error_type}, status_code=self.status,
                            headers=headers)
