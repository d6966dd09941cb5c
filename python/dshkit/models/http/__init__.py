"""What every HTTP model shares, whatever its wire format: the request and retry loop with
cancellation (`model`), the endpoint URL and the provider a URL implies (`urls`), the server-sent
event decoder (`sse`) and the reading of error bodies, JSON answers and response headers
(`error_body`)."""
