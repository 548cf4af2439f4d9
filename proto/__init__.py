"""The Seedcast gRPC contract (`seedcast.proto`) and its generated Python stubs."""
