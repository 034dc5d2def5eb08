/** The test suites' one error (docs/errors.md): a bad suite or run request, an unknown suite or run, no runner. */
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export type TestSuiteErrorCode = 'TEST_SUITE_INVALID' | 'TEST_SUITE_NOT_FOUND' | 'TEST_SUITE_NO_RUNNER';

export class TestSuiteError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.TEST_SUITE_INVALID, ErrorCodes.TEST_SUITE_NOT_FOUND, ErrorCodes.TEST_SUITE_NO_RUNNER] as const;
  override name = 'TestSuiteError';
  declare readonly code: TestSuiteErrorCode;
  constructor(
    code: TestSuiteErrorCode,
    message: string,
    /** Path-first problems (`tests[2].script[0].expect_node: unknown node "x" …`). */
    readonly details: string[] = [],
  ) {
    super(code, message);
  }
}
