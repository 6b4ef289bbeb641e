// Unit tests of the lab extension (tokenizers, line maps, templates: no DOM) and of the
// widgets' front end (src/__tests__/widget: jsdom, chosen per file with @jest-environment).
module.exports = {
  testEnvironment: 'node',
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
