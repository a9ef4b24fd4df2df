module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // Transpile only (isolatedModules in tsconfig.json): ci.sh type-checks with tsc first.
  transform: { '^.+\\.tsx?$': 'ts-jest' },
};
