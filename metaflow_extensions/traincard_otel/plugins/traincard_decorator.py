from traincard_otel.metaflow.decorator import TraincardDecorator

__all__ = ["TraincardDecorator"]
