"""The long-lived Seedcast inference server: a gRPC front end over pluggable model backends."""
