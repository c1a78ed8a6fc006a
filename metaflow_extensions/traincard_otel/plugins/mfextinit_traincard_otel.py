STEP_DECORATORS_DESC = [("traincard", ".traincard_decorator.TraincardDecorator")]
