/**
 * Every tab's renderer, by tab id. The type makes it whole: a tab Python has
 * (`contracts.PaneId`) without a renderer here, or a renderer for another pane's
 * model, does not compile.
 */

import type {
  IDiffPane,
  IIrPane,
  IJaxprPane,
  IOverviewPane,
  IRunPane,
  ISourcePane,
  ITilesPane,
  PaneId
} from '../../contracts';
import { ITabRenderer } from '../context';
import { DIFF } from './diff';
import { IR } from './ir';
import { JAXPR } from './jaxpr';
import { OVERVIEW } from './overview';
import { RUN } from './run';
import { SOURCE } from './source';
import { TILES } from './tiles';

/** The model of each tab's pane. */
export interface IPaneOf {
  overview: IOverviewPane;
  source: ISourcePane;
  jaxpr: IJaxprPane;
  tiles: ITilesPane;
  ir: IIrPane;
  run: IRunPane;
  diff: IDiffPane;
}

export const TABS: { [K in PaneId]: ITabRenderer<IPaneOf[K]> } = {
  overview: OVERVIEW,
  source: SOURCE,
  jaxpr: JAXPR,
  tiles: TILES,
  ir: IR,
  run: RUN,
  diff: DIFF
};
